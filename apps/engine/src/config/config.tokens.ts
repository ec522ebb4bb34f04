/** Injection token of the validated `EngineConfig`. */
export const ENGINE_CONFIG = Symbol('ENGINE_CONFIG');
/** Injection token of the `Clock` used for session expiry. */
export const CLOCK = Symbol('CLOCK');

export interface Clock {
  now(): Date;
}

export const systemClock: Clock = { now: () => new Date() };
