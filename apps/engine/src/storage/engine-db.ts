import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';

/**
 * A connection to the engine's own SQLite file (`<data>/engine.db`: sessions, plans, idempotency keys). Each store
 * owns and closes its connection; all share these settings: WAL, every commit synced, and a wait instead of an error
 * when another connection holds the write lock.
 */
export function openEngineDb(file: string): DatabaseSync {
  mkdirSync(path.dirname(file), { recursive: true });
  const db = new DatabaseSync(file);
  db.exec(`PRAGMA journal_mode = WAL;
    PRAGMA synchronous = FULL;
    PRAGMA busy_timeout = 5000;`);
  return db;
}
