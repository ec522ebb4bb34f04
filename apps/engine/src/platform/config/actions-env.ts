import { IntVar } from './env-parsing';

/** How many actions run and wait at once, and what each session keeps of them (events, idempotency, retries). */
export class ActionsEnv {
  /** Actions running at once across all sessions. */
  @IntVar(1, 1024)
  SWITCHYARD_MAX_CONCURRENT_ACTIONS = 16;

  /** Actions waiting for a slot across all sessions; beyond it requests get 429 with Retry-After. */
  @IntVar(0, 100_000)
  SWITCHYARD_MAX_QUEUED_ACTIONS = 256;

  /** Actions waiting per session; beyond it that session's requests get 429. */
  @IntVar(0, 10_000)
  SWITCHYARD_SESSION_MAX_QUEUED = 32;

  /** Default `maxConcurrentActions` of a session: 1 runs its actions one at a time. */
  @IntVar(1, 16)
  SWITCHYARD_SESSION_CONCURRENCY = 1;

  /** Events kept per session for SSE clients resuming with Last-Event-ID. */
  @IntVar(10, 1_000_000)
  SWITCHYARD_EVENTS_BUFFER = 1000;

  /** How long an Idempotency-Key's first answer is kept. */
  @IntVar(60, 30 * 24 * 3600)
  SWITCHYARD_IDEMPOTENCY_TTL_SECONDS = 24 * 3600;

  /** Longest retry chain (RETRY_OF links) an action may start. */
  @IntVar(1, 1000)
  SWITCHYARD_MAX_RETRY_DEPTH = 10;
}

export interface ActionsConfig {
  maxRunning: number;
  maxQueued: number;
  maxQueuedPerSession: number;
  sessionConcurrency: number;
  eventsBuffer: number;
  idempotencyTtlSeconds: number;
  maxRetryDepth: number;
}

export function actionsConfig(env: ActionsEnv): ActionsConfig {
  return {
    maxRunning: env.SWITCHYARD_MAX_CONCURRENT_ACTIONS,
    maxQueued: env.SWITCHYARD_MAX_QUEUED_ACTIONS,
    maxQueuedPerSession: env.SWITCHYARD_SESSION_MAX_QUEUED,
    sessionConcurrency: env.SWITCHYARD_SESSION_CONCURRENCY,
    eventsBuffer: env.SWITCHYARD_EVENTS_BUFFER,
    idempotencyTtlSeconds: env.SWITCHYARD_IDEMPOTENCY_TTL_SECONDS,
    maxRetryDepth: env.SWITCHYARD_MAX_RETRY_DEPTH,
  };
}
