import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock, InvalidInputError, SwitchyardError } from '@switchyard/common';
import type { Response } from 'express';
import { createHash } from 'node:crypto';
import type { DatabaseSync } from 'node:sqlite';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import { EngineDb } from '../storage/engine-db';

/** The key was used before with a different request. */
export class IdempotencyKeyReusedError extends SwitchyardError {
  readonly code = 'IDEMPOTENCY_KEY_REUSED';
  readonly kind = 'unprocessable' as const;
}

export interface IdempotentAnswer<T = unknown> {
  statusCode: number;
  body: T;
  /** True when this is the stored answer of an earlier request. */
  replayed: boolean;
}

/** Sets the answer's status code, and `Idempotent-Replayed` on a replay; returns its body. */
export function sendIdempotentStatus<T>(res: Response, answer: IdempotentAnswer<T>): T {
  res.status(answer.statusCode);
  if (answer.replayed) res.setHeader('Idempotent-Replayed', 'true');
  return answer.body;
}

/** A key the engine takes: 1–255 visible ASCII characters. */
export const IDEMPOTENCY_KEY_PATTERN = /^[\x21-\x7e]{1,255}$/;

/**
 * `Idempotency-Key` support: the first answer to a (tenant, key) is stored in the engine's SQLite file and returned
 * again for a repeat of the same request, without running it again, for `ttlSeconds`. A repeat with another body
 * (or on another endpoint) is refused with 422. A repeat that arrives while the first is still running waits for it.
 * Only successful answers are kept: a refused request (4xx) may be corrected and sent again under the same key.
 */
@Injectable()
export class IdempotencyService {
  private readonly db: DatabaseSync;
  private readonly inProgress = new Map<string, { hash: string; answer: Promise<IdempotentAnswer> }>();
  private readonly ttlMs: number;
  private lastSweep = 0;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    file: EngineDb,
  ) {
    this.db = file.db;
    this.db.exec(`
      CREATE TABLE IF NOT EXISTS idempotency (
        tenant TEXT NOT NULL,
        key TEXT NOT NULL,
        request_hash TEXT NOT NULL,
        status_code INTEGER NOT NULL,
        body TEXT NOT NULL,
        created_at INTEGER NOT NULL,
        PRIMARY KEY (tenant, key)
      ) STRICT, WITHOUT ROWID;
    `);
    this.ttlMs = config.actions.idempotencyTtlSeconds * 1000;
  }

  /** Runs `handler` once per (tenant, key); without a key it just runs it. */
  async run<T>(
    tenant: string,
    key: string | undefined,
    request: { method: string; path: string; body: unknown },
    handler: () => Promise<{ statusCode: number; body: T }>,
  ): Promise<IdempotentAnswer<T>> {
    if (key === undefined) return { ...(await handler()), replayed: false };
    if (!IDEMPOTENCY_KEY_PATTERN.test(key)) {
      throw new InvalidInputError(
        'Idempotency-Key',
        'the Idempotency-Key header must be 1–255 visible ASCII characters',
      );
    }
    const hash = createHash('sha256')
      .update(`${request.method} ${request.path}\n${JSON.stringify(request.body ?? null)}`)
      .digest('hex');
    const id = `${tenant}\n${key}`;
    const running = this.inProgress.get(id);
    if (running) {
      this.assertSame(running.hash, hash, key);
      return { ...((await running.answer) as IdempotentAnswer<T>), replayed: true };
    }
    const stored = this.lookup(tenant, key);
    if (stored) {
      this.assertSame(stored.request_hash, hash, key);
      return { statusCode: stored.status_code, body: JSON.parse(stored.body) as T, replayed: true };
    }
    const answer = handler().then((a) => {
      if (a.statusCode < 300) this.store(tenant, key, hash, a.statusCode, a.body);
      return { ...a, replayed: false };
    });
    this.inProgress.set(id, { hash, answer });
    try {
      return await answer;
    } finally {
      this.inProgress.delete(id);
    }
  }

  private assertSame(storedHash: string, hash: string, key: string): void {
    if (storedHash !== hash) {
      throw new IdempotencyKeyReusedError(
        `Idempotency-Key "${key}" was already used with a different request; use a new key for a new request`,
        { field: 'Idempotency-Key' },
      );
    }
  }

  private lookup(
    tenant: string,
    key: string,
  ): { request_hash: string; status_code: number; body: string } | undefined {
    const row = this.db
      .prepare(
        'SELECT request_hash, status_code, body, created_at FROM idempotency WHERE tenant = ? AND key = ?',
      )
      .get(tenant, key) as
      { request_hash: string; status_code: number; body: string; created_at: number } | undefined;
    return row && row.created_at > this.clock.now().getTime() - this.ttlMs ? row : undefined;
  }

  private store(tenant: string, key: string, hash: string, statusCode: number, body: unknown): void {
    const now = this.clock.now().getTime();
    this.db
      .prepare(
        `INSERT INTO idempotency (tenant, key, request_hash, status_code, body, created_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant, key) DO UPDATE SET request_hash = excluded.request_hash,
           status_code = excluded.status_code, body = excluded.body, created_at = excluded.created_at`,
      )
      .run(tenant, key, hash, statusCode, JSON.stringify(body), now);
    // Expired keys go in passing, at most once a minute.
    if (now - this.lastSweep > 60_000) {
      this.lastSweep = now;
      this.db.prepare('DELETE FROM idempotency WHERE created_at <= ?').run(now - this.ttlMs);
    }
  }
}
