import neo4j, { type Driver, Neo4jError } from 'neo4j-driver';
import { GraphStoreConnectionError, type GraphStoreSetting } from '../context-graph.errors';

// Reaching Neo4j: the driver built from the store's settings, and which setting a failure points at. Kept apart
// from the store, which keeps the driver's use (transactions, port calls).

const NO_AUTH_HINT = 'check the user name and password';

/** The settings a driver is built from (those of `Neo4jContextGraphOptions`). */
export interface Neo4jDriverSettings {
  uri: string;
  username?: string;
  password?: string;
  maxTransactionRetryTimeMs?: number;
}

/** A driver for `settings`; a URI the driver refuses is a `GraphStoreConnectionError` naming `uri`. */
export function createNeo4jDriver(settings: Neo4jDriverSettings): Driver {
  const { uri, username = 'neo4j', password } = settings;
  try {
    return neo4j.driver(uri, password === undefined ? undefined : neo4j.auth.basic(username, password), {
      disableLosslessIntegers: true,
      maxTransactionRetryTime: settings.maxTransactionRetryTimeMs ?? 30_000,
      connectionTimeout: 5_000,
      connectionAcquisitionTimeout: 10_000,
      userAgent: 'switchyard',
    });
  } catch (error) {
    throw new GraphStoreConnectionError(
      'uri',
      `invalid Neo4j URI ${JSON.stringify(uri)}: ${errorMessage(error)}`,
      {
        cause: error,
      },
    );
  }
}

/** Which setting a failure points at, and whether waiting could help. */
export function classifyNeo4jFailure(
  error: unknown,
  uri: string,
  database: string,
): { setting: GraphStoreSetting; transient: boolean; message: string } {
  const code = error instanceof Neo4jError ? error.code : '';
  const where = `Neo4j at ${uri}`;
  if (code.startsWith('Neo.ClientError.Security.')) {
    return {
      setting: 'credentials',
      transient: false,
      message: `${where} refused the login (${code}): ${NO_AUTH_HINT}`,
    };
  }
  if (code === 'Neo.ClientError.Database.DatabaseNotFound') {
    return {
      setting: 'database',
      transient: false,
      message: `${where} has no database "${database}"`,
    };
  }
  const transient =
    code === 'ServiceUnavailable' || code === 'SessionExpired' || Neo4jError.isRetriable(error);
  return { setting: 'uri', transient, message: `cannot use ${where}: ${errorMessage(error)}` };
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * `IF NOT EXISTS` does not cover two processes creating the same index at once (engine replicas starting together):
 * the second is refused with an "equivalent rule already exists" error, which means the schema is there.
 */
export function ignoreConcurrentSchema(error: unknown): void {
  const code = (error as { code?: string }).code ?? '';
  if (
    /^Neo\.ClientError\.Schema\.(EquivalentSchemaRuleAlreadyExists|ConstraintAlreadyExists|IndexAlreadyExists)$/.test(
      code,
    )
  ) {
    return;
  }
  throw error;
}
