import { Inject, Injectable, Logger } from '@nestjs/common';
import { CLOCK, type Clock, InvalidInputError, SwitchyardError } from '@switchyard/common';
import type { Response } from 'express';
import { createHash } from 'node:crypto';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { IdempotencyStore } from '../../state/idempotency/idempotency.store';

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

/** What tells two requests under one key apart: method, path and body. */
export function requestHash(request: { method: string; path: string; body: unknown }): string {
  return createHash('sha256')
    .update(`${request.method} ${request.path}\n${JSON.stringify(request.body ?? null)}`)
    .digest('hex');
}

/** Pauses between a waiting request's looks at a key another replica runs: doubling from the first to the last. */
const POLL_FIRST_MS = 20;
const POLL_MAX_MS = 500;
/** How long a claim lives unrenewed with one engine (no replica can take it over, so it only bounds the sweep). */
const SINGLE_ENGINE_CLAIM_MS = 60_000;

/**
 * `Idempotency-Key` support: the first answer to a (tenant, key) is stored and returned again for a repeat of the
 * same request, without running it again, for `ttlSeconds`. A repeat with another body (or on another endpoint) is
 * refused with 422. A repeat that arrives while the first is still running waits for it: in memory on the same
 * engine; across replicas by asking the store again, with pauses, until the first is answered, or released (then
 * the repeat runs), or its claim goes unrenewed for the replica lease (its replica died: the repeat takes it over).
 * Only successful answers are kept: a refused request (4xx) may be corrected and sent again under the same key.
 */
@Injectable()
export class IdempotencyService {
  private readonly logger = new Logger('Idempotency');
  private readonly inProgress = new Map<string, { hash: string; answer: Promise<IdempotentAnswer> }>();
  private readonly ttlMs: number;
  /** A claim not renewed for this long was left by a replica that died. */
  private readonly claimTimeoutMs: number;
  private lastSweep = 0;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly store: IdempotencyStore,
  ) {
    this.ttlMs = config.actions.idempotencyTtlSeconds * 1000;
    this.claimTimeoutMs = config.state.store === 'postgres' ? config.state.leaseMs : SINGLE_ENGINE_CLAIM_MS;
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
    const hash = requestHash(request);
    const id = `${tenant}\n${key}`;
    const running = this.inProgress.get(id);
    if (running) {
      this.assertSame(running.hash, hash, key);
      return { ...((await running.answer) as IdempotentAnswer<T>), replayed: true };
    }
    // In the map before the first await, so a repeat on this engine waits for this one instead of claiming too.
    const answer = this.claimAndRun(tenant, key, hash, handler);
    this.inProgress.set(id, { hash, answer });
    try {
      return await answer;
    } finally {
      this.inProgress.delete(id);
    }
  }

  private async claimAndRun<T>(
    tenant: string,
    key: string,
    hash: string,
    handler: () => Promise<{ statusCode: number; body: T }>,
  ): Promise<IdempotentAnswer<T>> {
    let pause = POLL_FIRST_MS;
    for (;;) {
      const now = this.clock.now().getTime();
      const claim = await this.store.claim({
        tenant,
        key,
        requestHash: hash,
        now,
        expiredAt: now - this.ttlMs,
        staleAt: now - this.claimTimeoutMs,
      });
      switch (claim.state) {
        case 'claimed':
          return this.runClaimed(tenant, key, hash, claim.token, handler);
        case 'answered':
          this.assertSame(claim.requestHash, hash, key);
          return { statusCode: claim.statusCode, body: claim.body as T, replayed: true };
        case 'running':
          this.assertSame(claim.requestHash, hash, key);
          await new Promise((resolve) => setTimeout(resolve, pause));
          pause = Math.min(pause * 2, POLL_MAX_MS);
      }
    }
  }

  /** Runs the request under its claim, renewed meanwhile; keeps a successful answer, else gives the key up. */
  private async runClaimed<T>(
    tenant: string,
    key: string,
    hash: string,
    token: string,
    handler: () => Promise<{ statusCode: number; body: T }>,
  ): Promise<IdempotentAnswer<T>> {
    const renewal = setInterval(() => {
      this.store.renew(tenant, key, token, this.clock.now().getTime()).then(
        (held) => {
          if (!held) this.logger.warn({ msg: 'idempotency claim lost while its request runs', tenant, key });
        },
        (error: unknown) =>
          this.logger.warn({ msg: 'cannot renew an idempotency claim', tenant, key, error: String(error) }),
      );
    }, this.claimTimeoutMs / 3);
    renewal.unref();
    let answer: { statusCode: number; body: T };
    try {
      answer = await handler();
    } catch (error) {
      clearInterval(renewal);
      await this.release(tenant, key, token);
      throw error;
    }
    clearInterval(renewal);
    if (answer.statusCode >= 300) {
      await this.release(tenant, key, token);
      return { ...answer, replayed: false };
    }
    const now = this.clock.now().getTime();
    await this.store.put(tenant, key, token, { requestHash: hash, ...answer }, now);
    // Expired keys (and claims abandoned as long) go in passing, at most once a minute.
    if (now - this.lastSweep > 60_000) {
      this.lastSweep = now;
      const expiredAt = now - this.ttlMs;
      this.store
        .sweep(expiredAt, Math.min(expiredAt, now - this.claimTimeoutMs))
        .catch((error: unknown) =>
          this.logger.warn({ msg: 'cannot sweep expired idempotency keys', error: String(error) }),
        );
    }
    return { ...answer, replayed: false };
  }

  /** Gives the key up; a failure only leaves the claim to expire (logged, never thrown over the request's own). */
  private async release(tenant: string, key: string, token: string): Promise<void> {
    await this.store.release(tenant, key, token).catch((error: unknown) => {
      this.logger.warn({ msg: 'cannot release an idempotency claim', tenant, key, error: String(error) });
    });
  }

  private assertSame(storedHash: string, hash: string, key: string): void {
    if (storedHash !== hash) {
      throw new IdempotencyKeyReusedError(
        `Idempotency-Key "${key}" was already used with a different request; use a new key for a new request`,
        { field: 'Idempotency-Key' },
      );
    }
  }
}
