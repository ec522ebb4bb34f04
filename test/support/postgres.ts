import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { Client } from 'pg';

const REPO = path.resolve(__dirname, '../..');

/** Where `scripts/postgres.sh` keeps instance `name`. */
function postgresInstanceDir(name: string): string {
  return path.join(process.env.SWITCHYARD_RUNTIME_DIR ?? path.join(REPO, '.runtime'), 'postgres', name);
}

/**
 * The URL of the PostgreSQL that `scripts/postgres.sh start [name]` runs (`npm test` starts instance `test`):
 * `postgres://switchyard:<password>@127.0.0.1:<port>/switchyard`. Throws when the script has not started it.
 */
export function postgresUrl(name = 'test'): string {
  const file = path.join(postgresInstanceDir(name), 'url');
  if (!existsSync(file)) {
    const start = `bash scripts/postgres.sh start${name === 'test' ? '' : ` ${name}`}`;
    throw new Error(`no test PostgreSQL (no ${file}): start one with \`${start}\` (npm test does it)`);
  }
  return readFileSync(file, 'utf8').trim();
}

/** Runs one statement on the instance's own `switchyard` database. */
async function onMaintenanceDb(url: string, sql: string): Promise<void> {
  const admin = new URL(url);
  admin.pathname = '/switchyard';
  const client = new Client({ connectionString: admin.toString() });
  await client.connect();
  try {
    await client.query(sql);
  } finally {
    await client.end();
  }
}

/**
 * A new, empty database owned by `switchyard` on instance `name`, with a random name, so that each suite has
 * its own; returns its URL. Remove it with `dropDatabase`.
 */
export async function freshDatabase(name = 'test'): Promise<string> {
  const url = new URL(postgresUrl(name));
  const database = `test_${randomBytes(8).toString('hex')}`;
  await onMaintenanceDb(url.toString(), `CREATE DATABASE ${database} OWNER switchyard`);
  url.pathname = `/${database}`;
  return url.toString();
}

/** Drops the database a `freshDatabase` URL names, disconnecting whoever is still on it. */
export async function dropDatabase(url: string): Promise<void> {
  const database = decodeURIComponent(new URL(url).pathname.slice(1));
  if (!/^test_[0-9a-f]+$/.test(database)) throw new Error(`not a database from freshDatabase: ${database}`);
  // FORCE cannot end a backend of another role (an autovacuum worker that is just then on the database: "must be a
  // member of the role whose process is being terminated"); that one ends by itself in moments, so try again.
  for (let attempt = 1; ; attempt++) {
    try {
      await onMaintenanceDb(url, `DROP DATABASE IF EXISTS ${database} WITH (FORCE)`);
      return;
    } catch (err) {
      if ((err as { code?: string }).code !== '42501' || attempt === 20) throw err;
      await new Promise((resolve) => setTimeout(resolve, 250));
    }
  }
}
