import { Inject, Injectable, type OnApplicationShutdown } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import * as path from 'node:path';
import { DatabaseSync } from 'node:sqlite';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';

/**
 * The engine's own SQLite file (`<data>/engine.db`: sessions, plans, idempotency keys), opened once and closed once,
 * after every store that uses it (its module is global, so Nest shuts it down last). WAL, every commit synced, and a
 * wait instead of an error when another connection holds the write lock.
 */
@Injectable()
export class EngineDb implements OnApplicationShutdown {
  readonly db: DatabaseSync;
  private closed = false;

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    const file = path.join(config.dataDir, 'engine.db');
    mkdirSync(path.dirname(file), { recursive: true });
    this.db = new DatabaseSync(file);
    this.db.exec(`PRAGMA journal_mode = WAL;
      PRAGMA synchronous = FULL;
      PRAGMA busy_timeout = 5000;`);
  }

  /** False once closed: late writers (a plan settling during shutdown) skip instead of failing. */
  get isOpen(): boolean {
    return !this.closed;
  }

  onApplicationShutdown(): void {
    if (this.closed) return;
    this.closed = true;
    this.db.close();
  }
}
