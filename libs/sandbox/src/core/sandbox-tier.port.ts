import type { Tier } from '@switchyard/common';
import type { TierAvailability, TierJob, TierRunResult } from './sandbox.types';
import type { StatefulBoxHost } from './stateful/stateful-box.port';

/**
 * One execution tier (subprocess, pooled container, one-off container).
 *
 * Contract:
 * - `run` never rejects for anything the user's code does: exits, signals, timeouts and limits are data
 *   in `TierRunResult`. It rejects only for engine faults (`SandboxError` subclasses).
 * - On timeout or abort everything the job started is killed before `run` resolves.
 * - `releaseSession` frees whatever the tier holds for a session, its stateful box included; idempotent.
 * - `fenceSession` (optional, synchronous): the session has ended and its release follows; what it holds no longer
 *   counts against a per-session limit, so another session is not refused for a sandbox already on its way out.
 * - A tier that can hold a session's kernels and background processes offers `stateful`.
 */
export abstract class SandboxTier {
  abstract readonly name: Tier;
  readonly stateful?: StatefulBoxHost;
  abstract availability(): Promise<TierAvailability>;
  abstract run(job: TierJob, signal?: AbortSignal): Promise<TierRunResult>;
  abstract releaseSession(sessionId: string): Promise<void>;
  fenceSession?(sessionId: string): void;
}
