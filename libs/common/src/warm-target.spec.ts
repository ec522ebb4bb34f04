import type { Clock } from './clock';
import { WarmTarget } from './warm-target';

/** A clock that moves only when the spec sets `t` (ms). */
class FakeClock implements Clock {
  constructor(public t = 0) {}
  now(): Date {
    return new Date(this.t);
  }
  monotonic(): number {
    return this.t;
  }
}

describe('WarmTarget', () => {
  const make = (min = 2, max = 16, windowMs = 60_000) => {
    const clock = new FakeClock(1_000_000);
    return { clock, target: new WarmTarget({ min, max, windowMs }, clock) };
  };

  it('is the floor while nothing is claimed', () => {
    expect(make().target.target()).toBe(2);
  });

  it('adds the claims that came within one start time: 16 at once ask for 16 more', () => {
    const { target } = make(2, 32);
    for (let i = 0; i < 16; i++) target.claimed();
    expect(target.target()).toBe(18);
  });

  it('counts only claims within one start time (at least 1 s), which it learns from the starts', () => {
    const { clock, target } = make();
    target.started(200);
    // One claim every 500 ms: two fall within any second (a start quicker than that still spans a second).
    for (let i = 0; i < 10; i++) {
      target.claimed();
      clock.t += 500;
    }
    expect(target.target()).toBe(2 + 2);
    // Starts slow down (a loaded host): the same arrival rate now asks for more.
    for (let i = 0; i < 10; i++) target.started(3000);
    for (let i = 0; i < 10; i++) {
      target.claimed();
      clock.t += 500;
    }
    expect(target.target()).toBeGreaterThanOrEqual(2 + 5);
  });

  it('holds the largest burst for the window, then falls back to the floor', () => {
    const { clock, target } = make(2, 16, 60_000);
    for (let i = 0; i < 10; i++) target.claimed();
    clock.t += 30_000;
    target.claimed(); // a smaller burst later does not lower it
    expect(target.target()).toBe(12);
    clock.t += 30_001;
    expect(target.target()).toBe(3); // the first burst left the window; the single claim has not
    clock.t += 30_000;
    expect(target.target()).toBe(2);
  });

  it('adds the claims of the window that found nothing warm, when a burst served cold looked small', () => {
    const { clock, target } = make(2, 32);
    target.started(300);
    // Back to back, each claim waiting for a start: never two within one start time, but ten short.
    for (let i = 0; i < 10; i++) {
      target.claimed();
      target.missed();
      clock.t += 400;
    }
    expect(target.target()).toBe(12);
    clock.t += 60_000;
    expect(target.target()).toBe(2);
  });

  it('never exceeds max', () => {
    const { target } = make(2, 8);
    for (let i = 0; i < 60; i++) target.claimed();
    expect(target.target()).toBe(8);
  });

  it('keeps no pool when the floor is 0', () => {
    const { target } = make(0, 8);
    for (let i = 0; i < 5; i++) target.claimed();
    expect(target.target()).toBe(0);
  });
});
