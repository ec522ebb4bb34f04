import { Logger } from '@nestjs/common';
import { FakeClock } from '../../../../test/fake-clock';
import type { PooledContainer, PooledContainerFactory } from './pooled-container';
import { resolvePooledOptions, type ResolvedPooledOptions } from './pooled.options';
import { WarmPool } from './warm-pool';

/** Containers that start when the test says so, each counted; healthy unless told otherwise. */
class FakeFactory {
  created = 0;
  destroyed = 0;
  running = 0;
  mostRunning = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly clock: FakeClock,
    /** Start at once, or wait for `finishStarts`. */
    public instant = true,
    /** How long a start takes on the fake clock. */
    private readonly startMs = 100,
  ) {}

  async create(): Promise<PooledContainer> {
    this.running++;
    this.mostRunning = Math.max(this.mostRunning, this.running);
    // A start takes time: never within the call that asked for it.
    await new Promise<void>((resolve) => (this.instant ? setImmediate(resolve) : this.waiting.push(resolve)));
    this.clock.t += this.startMs;
    this.running--;
    this.created++;
    return {
      id: `c${this.created}`,
      shortId: `c${this.created}`,
      state: 'warm',
      readyAt: this.clock.monotonic(),
      connection: { closed: new Promise(() => undefined), isClosed: false },
    } as unknown as PooledContainer;
  }

  /** Lets every start waiting now finish. */
  finishStarts(): number {
    const n = this.waiting.length;
    for (const go of this.waiting.splice(0)) go();
    return n;
  }

  async destroy(c: PooledContainer): Promise<void> {
    c.state = 'destroyed';
    this.destroyed++;
  }

  async healthy(c: PooledContainer): Promise<boolean> {
    return c.state !== 'destroyed';
  }
}

const eventually = async (check: () => boolean, withinMs = 3000) => {
  const deadline = Date.now() + withinMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 2));
  }
};

describe('WarmPool: a target that follows the claims, and bounded parallel starts', () => {
  let pool: WarmPool | undefined;
  beforeAll(() => Logger.overrideLogger(false));
  afterEach(async () => {
    await pool?.close();
    pool = undefined;
  });

  const make = (extra: Partial<ResolvedPooledOptions> = {}, instant = true, startMs = 100) => {
    const clock = new FakeClock(1_000_000);
    const factory = new FakeFactory(clock, instant, startMs);
    const options: ResolvedPooledOptions = {
      ...resolvePooledOptions({ image: 'switchyard/sandbox:test', min: 2, max: 16, starts: 3 }),
      ...extra,
    };
    pool = new WarmPool(factory as unknown as PooledContainerFactory, options, clock);
    pool.start();
    return { pool, clock, factory };
  };
  const claim = (p: WarmPool) => p.claim(async () => undefined);

  it('after a burst of claims holds the floor plus the burst, so the next burst like it is warm', async () => {
    const { pool, factory } = make();
    await eventually(() => pool.stats().available === 2);
    // A first burst of 6 at once: 2 warm, 4 wait for starts.
    await Promise.all(Array.from({ length: 6 }, () => claim(pool)));
    expect(pool.stats()).toMatchObject({ warmClaims: 2, coldClaims: 4, min: 2, target: 8 });
    await eventually(() => pool.stats().available === 8);
    // The same burst again: every claim warm.
    await Promise.all(Array.from({ length: 6 }, () => claim(pool)));
    expect(pool.stats()).toMatchObject({ warmClaims: 8, coldClaims: 4 });
    await eventually(() => pool.stats().available === 8);
    // 2 at start, 4 for the cold claims, 8 to reach the target, 6 replacements.
    expect(factory.created).toBe(2 + 4 + 8 + 6);
  });

  it('starts at most `starts` containers at once, however many it is short of', async () => {
    const { pool, factory } = make({ starts: 3 }, false);
    await eventually(() => factory.running === 2);
    factory.finishStarts();
    await eventually(() => pool.stats().available === 2);
    await Promise.all(Array.from({ length: 2 }, () => claim(pool)));
    // Target 4, none warm: 4 starts wanted, 3 running, 1 waiting for a slot.
    await eventually(() => factory.running === 3).catch((err: Error) => {
      throw new Error(`${err.message}: ${JSON.stringify({ running: factory.running, ...pool.stats() })}`);
    });
    expect(pool.stats()).toMatchObject({ target: 4, starting: 3 });
    expect(factory.finishStarts()).toBe(3);
    await eventually(() => factory.running === 1);
    expect(factory.finishStarts()).toBe(1);
    await eventually(() => pool.stats().available === 4);
    expect(factory.mostRunning).toBe(3);
  });

  it('falls back to the floor once the window passed, evicting what idles above it', async () => {
    // Real-time eviction (generic-pool's clock) is shortened to keep the test quick.
    const { pool, clock } = make({ demandWindowMs: 50, evictionIntervalMs: 20 }, true, 1);
    await eventually(() => pool.stats().available === 2);
    await Promise.all(Array.from({ length: 4 }, () => claim(pool)));
    await eventually(() => pool.stats().available === 6);
    clock.t += 51; // the burst leaves the window
    await eventually(() => pool.stats().target === 2 && pool.stats().available === 2);
    expect(pool.stats().size).toBe(2);
  });

  it('keeps no containers when the floor is 0, however many claims', async () => {
    const { pool, factory } = make({ min: 0 });
    await Promise.all(Array.from({ length: 3 }, () => claim(pool)));
    await new Promise((r) => setTimeout(r, 20));
    expect(pool.stats()).toMatchObject({ target: 0, size: 0, coldClaims: 3 });
    expect(factory.created).toBe(3);
  });
});
