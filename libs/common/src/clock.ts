/**
 * The one clock of the engine and its libraries. Tests inject a fake one under {@link CLOCK}; everything else
 * uses {@link systemClock}.
 */
export interface Clock {
  /** Wall-clock time: timestamps, expiry of things that outlive a process (sessions, leases). */
  now(): Date;
  /** Monotonic milliseconds: durations and idle times inside one process. */
  monotonic(): number;
}

/** Injection token of the {@link Clock}; libraries take it `@Optional()` and fall back to {@link systemClock}. */
export const CLOCK = Symbol('switchyard:clock');

export const systemClock: Clock = Object.freeze({
  now: () => new Date(),
  monotonic: () => performance.now(),
});
