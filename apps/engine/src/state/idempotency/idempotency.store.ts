/** A (tenant, key) to claim, with what decides whether an earlier holder of it still counts. */
export interface IdempotencyClaimRequest {
  tenant: string;
  key: string;
  /** The hash of the request (method, path, body) claiming it. */
  requestHash: string;
  /** Wall-clock milliseconds. */
  now: number;
  /** Answers stored at or before this instant have expired: the key is free again. */
  expiredAt: number;
  /** A claim last renewed at or before this instant was left by a claimer that died: it may be taken over. */
  staleAt: number;
}

/** What a claim found. */
export type IdempotencyClaim =
  /** The key is this caller's: run the request, then `put` its answer or `release` the key. */
  | { state: 'claimed'; token: string }
  /** The key's first request was answered: this is its answer, to replay. */
  | { state: 'answered'; requestHash: string; statusCode: number; body: unknown }
  /** Another replica runs the key's first request now: ask again later. */
  | { state: 'running'; requestHash: string };

/**
 * The table of `Idempotency-Key` answers, for `IdempotencyService` (which keeps the protocol). Adapters:
 * `SqliteIdempotencyStore` (engine.db: one engine, whose in-process map already serialises a key, so a claim writes
 * nothing) and `PostgresIdempotencyStore` (replicas: a claim is a placeholder row the other replicas see).
 */
export abstract class IdempotencyStore {
  /** Claims the key, or says who has it; takes over an expired answer or a stale claim. */
  abstract claim(request: IdempotencyClaimRequest): Promise<IdempotencyClaim>;

  /** Keeps a claim alive while its request runs; false when it is no longer this claimer's (taken over). */
  abstract renew(tenant: string, key: string, token: string, now: number): Promise<boolean>;

  /** Keeps the (successful) answer of the claim `token`; an answer whose claim was taken over is dropped. */
  abstract put(
    tenant: string,
    key: string,
    token: string,
    answer: { requestHash: string; statusCode: number; body: unknown },
    now: number,
  ): Promise<void>;

  /** Gives the key up (its request was refused or failed): the next request with it runs. */
  abstract release(tenant: string, key: string, token: string): Promise<void>;

  /** Removes answers stored at or before `expiredAt`, and claims last renewed at or before `abandonedAt`. */
  abstract sweep(expiredAt: number, abandonedAt: number): Promise<void>;
}
