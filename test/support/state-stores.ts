import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import type { EngineConfig } from '../../apps/engine/src/platform/config/engine-config';
import { EngineDb } from '../../apps/engine/src/state/storage/engine-db';
import { PostgresDb } from '../../apps/engine/src/state/storage/postgres-db';
import { dropDatabase, freshDatabase } from './postgres';

const REPO = path.resolve(__dirname, '../..');

/** An `EngineDb` on an engine.db of its own, in a temporary data dir removed by `close`. */
export function tempEngineDb(): { db: EngineDb; close(): void } {
  const dataDir = mkdtempSync(path.join(tmpdir(), 'switchyard-state-'));
  const db = new EngineDb({ dataDir } as EngineConfig);
  return {
    db,
    close: () => {
      db.onApplicationShutdown();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
}

/** Starts the test PostgreSQL (`scripts/postgres.sh`, instance `test`) unless it already answers. */
export function ensureTestPostgres(): void {
  try {
    execFileSync('bash', ['scripts/postgres.sh', 'status'], { cwd: REPO, stdio: 'ignore' });
  } catch {
    execFileSync('bash', ['scripts/postgres.sh', 'start'], {
      cwd: REPO,
      stdio: ['ignore', 'ignore', 'inherit'],
    });
  }
}

/**
 * A fresh database on the test PostgreSQL (started if needed): `open()` gives a `PostgresDb` on it (migrated), as
 * many as a test wants (one per replica); `close()` closes them all and drops the database.
 */
export async function freshPostgres(): Promise<{
  url: string;
  open(): Promise<PostgresDb>;
  close(): Promise<void>;
}> {
  ensureTestPostgres();
  const url = await freshDatabase();
  const opened: PostgresDb[] = [];
  return {
    url,
    open: async () => {
      const db = await PostgresDb.open({ url, poolSize: 4 });
      opened.push(db);
      return db;
    },
    close: async () => {
      await Promise.all(opened.map((db) => db.onApplicationShutdown()));
      await dropDatabase(url);
    },
  };
}

/** Resolves once `probe` returns true, polling every 5 ms; rejects after `timeoutMs`. Returns the time it took. */
export async function eventually(probe: () => boolean, timeoutMs = 2000): Promise<number> {
  const start = performance.now();
  while (!probe()) {
    if (performance.now() - start > timeoutMs) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
  return performance.now() - start;
}
