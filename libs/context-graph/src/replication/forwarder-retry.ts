/** Timers the forwarders wait with; tests pass fakes. Handles must not keep the process alive. */
export interface ForwarderTimers {
  setTimeout(callback: () => void, ms: number): unknown;
  clearTimeout(handle: unknown): void;
}

/** Real timers that do not keep the process alive. */
export const SYSTEM_TIMERS: ForwarderTimers = {
  setTimeout: (callback, ms) => setTimeout(callback, ms).unref(),
  clearTimeout: (handle) => clearTimeout(handle as NodeJS.Timeout),
};

/** How a forwarder backs off after failures (both outboxes' forwarders take these options). */
export interface RetryBackoffOptions {
  /** First retry delay after a failure. Default 100 ms. */
  initialBackoffMs?: number;
  /** Longest retry delay. Default 5000 ms. */
  maxBackoffMs?: number;
  /** Jitter source in [0, 1). Default `Math.random`. */
  random?: () => number;
}

/** The wait before the next try after `failures` failures in a row: doubling, capped, with jitter (half to all). */
export function retryDelay(failures: number, options: RetryBackoffOptions): number {
  const initial = options.initialBackoffMs ?? 100;
  const max = options.maxBackoffMs ?? 5000;
  const base = Math.min(max, initial * 2 ** Math.min(failures - 1, 30));
  return Math.round(base * (0.5 + (options.random ?? Math.random)() / 2));
}
