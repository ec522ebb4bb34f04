import { Inject, Injectable, Logger } from '@nestjs/common';
import { randomUUID } from 'node:crypto';
import { ENGINE_INSTANCE_ID } from '../../platform/config/config.tokens';
import { PostgresDb } from '../storage/postgres-db';
import { type IdempotencyClaim, type IdempotencyClaimRequest, IdempotencyStore } from './idempotency.store';

interface Row {
  status: 'running' | 'done';
  request_hash: string;
  status_code: number | null;
  body: unknown;
  created_at: string;
}

/** Times a claim may find the row gone or just expired between its two statements before it asks again later. */
const CLAIM_ATTEMPTS = 3;

/**
 * Answers in the replicas' shared Postgres (SWITCHYARD_STATE=postgres). A claim is a placeholder row (`running`, the
 * request's hash, the replica and a token, renewed while its request runs) inserted only where none is, so of two
 * replicas given the same key at once one runs it and the other sees it running. A placeholder no one renewed within
 * the claim timeout (its replica died) and an expired answer are taken over by the same statement, under the row's
 * lock, so exactly one replica takes them. Times are the engine clock's milliseconds.
 */
@Injectable()
export class PostgresIdempotencyStore extends IdempotencyStore {
  private readonly logger = new Logger('Idempotency');

  constructor(
    private readonly db: PostgresDb,
    @Inject(ENGINE_INSTANCE_ID) private readonly replica: string,
  ) {
    super();
  }

  async claim(request: IdempotencyClaimRequest): Promise<IdempotencyClaim> {
    const { tenant, key, requestHash, now, expiredAt, staleAt } = request;
    let seen: Row | undefined;
    for (let attempt = 0; attempt < CLAIM_ATTEMPTS; attempt++) {
      const token = randomUUID();
      const claimed = await this.db.query(
        `INSERT INTO idempotency_keys AS k
           (tenant, key, request_hash, status, created_at, claimed_by, claim_token, claimed_at)
         VALUES ($1, $2, $3, 'running', $4, $5, $6, $4)
         ON CONFLICT (tenant, key) DO UPDATE SET request_hash = excluded.request_hash, status = 'running',
           status_code = NULL, body = NULL, created_at = excluded.created_at, claimed_by = excluded.claimed_by,
           claim_token = excluded.claim_token, claimed_at = excluded.claimed_at
         WHERE (k.status = 'done' AND k.created_at <= $7) OR (k.status = 'running' AND k.claimed_at <= $8)
         RETURNING 1`,
        [tenant, key, requestHash, now, this.replica, token, expiredAt, staleAt],
      );
      if (claimed.length > 0) return { state: 'claimed', token };
      [seen] = await this.db.query<Row>(
        `SELECT status, request_hash, status_code, body, created_at FROM idempotency_keys
         WHERE tenant = $1 AND key = $2`,
        [tenant, key],
      );
      if (!seen) continue; // released meanwhile: claim again
      if (seen.status === 'running') return { state: 'running', requestHash: seen.request_hash };
      if (Number(seen.created_at) > expiredAt) {
        return {
          state: 'answered',
          requestHash: seen.request_hash,
          statusCode: seen.status_code as number,
          body: seen.body,
        };
      }
    }
    // Still moving under us: the caller asks again after a pause.
    return { state: 'running', requestHash: seen?.request_hash ?? requestHash };
  }

  async renew(tenant: string, key: string, token: string, now: number): Promise<boolean> {
    const rows = await this.db.query(
      `UPDATE idempotency_keys SET claimed_at = $4
       WHERE tenant = $1 AND key = $2 AND claim_token = $3 AND status = 'running' RETURNING 1`,
      [tenant, key, token, now],
    );
    return rows.length > 0;
  }

  async put(
    tenant: string,
    key: string,
    token: string,
    answer: { requestHash: string; statusCode: number; body: unknown },
    now: number,
  ): Promise<void> {
    const rows = await this.db.query(
      `UPDATE idempotency_keys SET status = 'done', request_hash = $4, status_code = $5, body = $6::json,
         created_at = $7
       WHERE tenant = $1 AND key = $2 AND claim_token = $3 AND status = 'running' RETURNING 1`,
      [tenant, key, token, answer.requestHash, answer.statusCode, JSON.stringify(answer.body), now],
    );
    if (rows.length === 0) {
      // Another replica judged this claim dead and took the key: its answer is the one kept.
      this.logger.warn({ msg: 'idempotency claim was taken over before its answer was kept', tenant, key });
    }
  }

  async release(tenant: string, key: string, token: string): Promise<void> {
    await this.db.query(
      `DELETE FROM idempotency_keys WHERE tenant = $1 AND key = $2 AND claim_token = $3 AND status = 'running'`,
      [tenant, key, token],
    );
  }

  async sweep(expiredAt: number, abandonedAt: number): Promise<void> {
    await this.db.query(
      `DELETE FROM idempotency_keys
       WHERE (status = 'done' AND created_at <= $1) OR (status = 'running' AND claimed_at <= $2)`,
      [expiredAt, abandonedAt],
    );
  }
}
