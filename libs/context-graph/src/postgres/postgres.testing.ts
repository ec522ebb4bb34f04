import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';

// Test-only: finds the PostgreSQL `scripts/postgres.sh` runs, as `neo4j.testing.ts` finds Neo4j (libs do not import
// the repository's test/support), and gives each suite a database of its own so suites can run side by side.

/** The checkout: the nearest parent holding the script (this file also runs compiled, from `dist/`). */
function repoRoot(): string {
  for (let dir = __dirname; dir !== path.dirname(dir); dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'scripts', 'postgres.sh'))) return dir;
  }
  throw new Error(`scripts/postgres.sh not found above ${__dirname}`);
}

/** Synchronous TCP probe (test files decide at load time whether they can run at all). */
function answers(url: string): boolean {
  const { hostname, port } = new URL(url);
  const probe = `require('node:net').connect(${Number(port || 5432)}, ${JSON.stringify(hostname)})
    .on('connect', () => process.exit(0)).on('error', () => process.exit(1))`;
  return spawnSync(process.execPath, ['-e', probe], { timeout: 5000 }).status === 0;
}

/**
 * The URL of the test PostgreSQL that `npm test` starts (`bash scripts/postgres.sh start`), or the one named by
 * `SWITCHYARD_TEST_POSTGRES_URL`. Throws when it is not running: a test that needs Postgres fails, never skips.
 */
export function postgresTestUrl(): string {
  const runtime = process.env.SWITCHYARD_RUNTIME_DIR ?? path.join(repoRoot(), '.runtime');
  const file = path.join(runtime, 'postgres', 'test', 'url');
  const url =
    process.env.SWITCHYARD_TEST_POSTGRES_URL ??
    (existsSync(file) ? readFileSync(file, 'utf8').trim() : undefined);
  if (url === undefined || !answers(url)) {
    throw new Error(
      `no test PostgreSQL is running (${url === undefined ? `no ${file}` : 'it does not answer'}): start one with ` +
        '`bash scripts/postgres.sh start` (npm test does it), or point SWITCHYARD_TEST_POSTGRES_URL at one',
    );
  }
  return url;
}

async function onServer(url: string, sql: string): Promise<void> {
  const client = new Client({ connectionString: url });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/** A new, empty database (random name) on the server of `serverUrl`, owned by its user; returns its URL. */
export async function freshDatabase(serverUrl: string): Promise<string> {
  const url = new URL(serverUrl);
  const database = `test_${randomBytes(8).toString('hex')}`;
  await onServer(serverUrl, `CREATE DATABASE ${database}`);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Drops a database `freshDatabase` made, disconnecting whoever is still on it. */
export async function dropDatabase(serverUrl: string, databaseUrl: string): Promise<void> {
  const database = decodeURIComponent(new URL(databaseUrl).pathname.slice(1));
  if (!/^test_[0-9a-f]+$/.test(database)) throw new Error(`not a database from freshDatabase: ${database}`);
  await onServer(serverUrl, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
}
