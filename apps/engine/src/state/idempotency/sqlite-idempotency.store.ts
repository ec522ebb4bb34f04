import { Injectable } from '@nestjs/common';
import type { DatabaseSync } from 'node:sqlite';
import { EngineDb } from '../storage/engine-db';
import { type IdempotencyClaim, type IdempotencyClaimRequest, IdempotencyStore } from './idempotency.store';

interface Row {
  request_hash: string;
  status_code: number;
  body: string;
  created_at: number;
}

/**
 * Answers in the engine's SQLite file (SWITCHYARD_STATE=sqlite). One engine answers every request, and its service
 * already makes a repeat wait for the first in memory, so a claim writes nothing: only answers are rows.
 */
@Injectable()
export class SqliteIdempotencyStore extends IdempotencyStore {
  private readonly db: DatabaseSync;

  constructor(file: EngineDb) {
    super();
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
  }

  async claim(request: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    const row = this.db
      .prepare(
        'SELECT request_hash, status_code, body, created_at FROM idempotency WHERE tenant = ? AND key = ?',
      )
      .get(request.tenant, request.key) as Row | undefined;
    if (!row || row.created_at <= request.expiredAt) return { state: 'claimed', token: 'local' };
    return {
      state: 'answered',
      requestHash: row.request_hash,
      statusCode: row.status_code,
      body: JSON.parse(row.body),
    };
  }

  async renew(): Promise<boolean> {
    return true;
  }

  async put(
    tenant: string,
    key: string,
    _token: string,
    answer: { requestHash: string; statusCode: number; body: unknown },
    now: number,
  ): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO idempotency (tenant, key, request_hash, status_code, body, created_at) VALUES (?, ?, ?, ?, ?, ?)
         ON CONFLICT (tenant, key) DO UPDATE SET request_hash = excluded.request_hash,
           status_code = excluded.status_code, body = excluded.body, created_at = excluded.created_at`,
      )
      .run(tenant, key, answer.requestHash, answer.statusCode, JSON.stringify(answer.body), now);
  }

  async release(): Promise<void> {
    // Nothing was written for the claim.
  }

  async sweep(expiredAt: number): Promise<void> {
    this.db.prepare('DELETE FROM idempotency WHERE created_at <= ?').run(expiredAt);
  }
}
