import type { Clock } from '@switchyard/common';

/** A clock that moves only when a spec sets `t` (ms, both wall clock and monotonic). @internal */
export class FakeClock implements Clock {
  constructor(public t = 0) {}

  now(): Date {
    return new Date(this.t);
  }

  monotonic(): number {
    return this.t;
  }
}
