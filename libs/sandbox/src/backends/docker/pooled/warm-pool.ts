import { Logger } from '@nestjs/common';
import { type Clock, systemClock, WarmTarget } from '@switchyard/common';
import { createPool, type Pool } from 'generic-pool';
import { PoolExhaustedError } from '../../../core/pooled.errors';
import type { PooledContainer, PooledContainerFactory } from './pooled-container';
import type { ResolvedPooledOptions } from './pooled.options';

/** Waits `ms`, or less when `signal` fires. Injected so tests need not wait for real backoff. */
export type Sleep = (ms: number, signal: AbortSignal) => Promise<void>;

const realSleep: Sleep = (ms, signal) =>
  new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    timer.unref();
    signal.addEventListener('abort', done, { once: true });
    function done() {
      clearTimeout(timer);
      signal.removeEventListener('abort', done);
      resolve();
    }
  });

const BACKOFF_BASE_MS = 200;
const BACKOFF_MAX_MS = 5000;
const CLOSING_RETRY_MS = 100;

/** Pool numbers for metrics. */
export interface WarmPoolStats {
  /** Warm containers, started or starting. */
  size: number;
  /** Warm, idle and ready to be claimed. */
  available: number;
  /** Being health-checked or handed to a session right now. */
  borrowed: number;
  /** Claims waiting for a warm container. */
  pending: number;
  /** The floor (`pooled.min`). */
  min: number;
  /** Warm containers the pool holds now: the floor plus the latest burst of claims (`WarmTarget`), at most `max`. */
  target: number;
  max: number;
  /** Container starts running now (at most `pooled.starts` at once). */
  starting: number;
  /** Container starts that failed in a row (reset by a success). */
  consecutiveCreateFailures: number;
  /** Claims served by a container that was already warm (started and checked) when the claim asked. */
  warmClaims: number;
  /** Claims that had to wait for a container to start: none was warm, or the warm ones failed their check. */
  coldClaims: number;
  lastCreateError?: { message: string; at: string };
}

/** generic-pool's configuration, whose `min` the pool moves with its target (generic-pool has no setter for it). */
interface GenericPoolInternals {
  _config: { min: number };
}

/**
 * Warm containers on generic-pool: a target kept started (`WarmTarget`: `min`, plus the latest burst of claims for
 * `demandWindowMs`, at most `max`), at most `starts` starting at once, idle ones past `warmIdleTimeoutMs` replaced,
 * and every container health-checked through its runner when borrowed (test on borrow: the runner really spawns a
 * process), so a dead, paused or hung one is destroyed instead of handed out. The borrow test is made here rather
 * than by generic-pool's `testOnBorrow`, because a claim runs it at the same time as its own preparation of the
 * container (`claim`), which generic-pool cannot do: its test runs before it knows which request gets the container.
 *
 * A claimed container is detached from the pool as soon as the claim has prepared it (it belongs to a session from
 * then on and is destroyed, never returned), so the pool starts its replacements right after (as many as the claim
 * raised the target by, plus one) and the next claim finds a warm one; not before, so that the replacements' starts
 * do not compete with the claim. The target is generic-pool's `min`, moved as claims come and the window passes
 * (generic-pool tops the pool up to it after each detach); idle containers above it are evicted once idle for the
 * window (`softIdleTimeoutMillis`), so after a quiet window the pool is back at its floor.
 *
 * A failing container start is retried inside `create` with exponential backoff (so a pool waiting on a missing
 * Docker engine neither spins nor gives up; it refills by itself when Docker is back).
 */
export class WarmPool {
  private readonly logger = new Logger('WarmPool');
  private readonly pool: Pool<PooledContainer>;
  private readonly closing = new AbortController();
  private failures = 0;
  private warmClaims = 0;
  private coldClaims = 0;
  private lastError?: { message: string; at: string };
  private sweeping = false;
  private readonly target: WarmTarget;
  /** Container starts holding one of the `starts` slots (those waiting for one are in `startQueue`). */
  private starting = 0;
  private readonly startQueue: Array<() => void> = [];
  private readonly retargetTimer: NodeJS.Timeout;

  constructor(
    private readonly factory: PooledContainerFactory,
    private readonly options: ResolvedPooledOptions,
    private readonly clock: Clock = systemClock,
    private readonly sleep: Sleep = realSleep,
  ) {
    this.target = new WarmTarget(
      { min: options.min, max: options.max, windowMs: options.demandWindowMs },
      clock,
    );
    this.pool = createPool<PooledContainer>(
      {
        create: () => this.createWithRetry(),
        // A claimed container is the session's now: detaching it from the pool must not destroy it.
        destroy: (c) => (c.state === 'claimed' ? Promise.resolve() : this.factory.destroy(c)),
      },
      {
        min: options.min,
        max: options.max,
        acquireTimeoutMillis: options.acquireTimeoutMs,
        // Every borrow is tested, by `claim` and `sweep` themselves (see the class comment).
        testOnBorrow: false,
        idleTimeoutMillis: options.warmIdleTimeoutMs,
        // Containers above the target go once idle this long (the target itself falls back after the same window).
        softIdleTimeoutMillis: options.demandWindowMs,
        evictionRunIntervalMillis: options.evictionIntervalMs,
        numTestsPerEvictionRun: options.max,
        autostart: false,
        fifo: true,
      },
    );
    this.pool.on('factoryDestroyError', (err: Error) =>
      this.logger.warn(`could not destroy a warm container: ${err.message}`),
    );
    // Lowers the target once a burst is out of the window (raising it is the claims' job).
    this.retargetTimer = setInterval(() => this.retarget(), options.evictionIntervalMs);
    this.retargetTimer.unref();
  }

  start(): void {
    this.pool.start();
  }

  /** Moves generic-pool's `min` to the target now; the pool tops up to it at the next detach. */
  private retarget(): void {
    (this.pool as unknown as GenericPoolInternals)._config.min = this.target.target();
  }

  /**
   * Health-checks the idle warm containers now (test-while-idle): each is borrowed and tested once; a dead, paused or
   * hung one is destroyed (the pool starts its replacement), healthy ones go straight back.
   * Runs as soon as a warm container's runner connection closes, so a killed one is replaced at once (a paused or
   * hung one is caught when next borrowed). Not periodic: borrowing resets generic-pool's idle clock, which would
   * keep `warmIdleTimeoutMs` from ever recycling a container. Claims waiting for a container take precedence.
   */
  async sweep(): Promise<void> {
    if (this.sweeping || this.isClosing) return;
    this.sweeping = true;
    try {
      for (
        let left = this.pool.available;
        left > 0 && this.pool.available > 0 && this.pool.pending === 0;
        left--
      ) {
        const container = await this.pool.acquire();
        if (await this.testOnBorrow(container)) await this.pool.release(container);
        else await this.pool.destroy(container);
      }
    } catch (err) {
      this.logger.debug(`idle health sweep stopped: ${(err as Error).message}`);
    } finally {
      this.sweeping = false;
    }
  }

  get isClosing(): boolean {
    return this.closing.signal.aborted;
  }

  /**
   * A warm container for a session. One is borrowed and, at the same time, tested (its runner really spawns a process
   * and reports the exit status) and given to `prepare` (the claim's workspace mount), so that a claim waits for one
   * runner round trip rather than for the test and then the mount. Only a container that passed the test and was
   * prepared is returned: claimed, detached from the pool (which starts its replacement only now, so that start does
   * not compete with the claim) and owned by the caller, who must destroy it. One that fails the test is destroyed
   * with whatever `prepare` mounted in it (a warm container has run nothing but its runner) and the next one is
   * tried; when `prepare` fails, the container is destroyed and the claim rejects with its error. Rejects with
   * `PoolExhaustedError` when no healthy container comes within `acquireTimeoutMs` (per borrow; no new borrow starts
   * past it).
   */
  async claim(prepare: (container: PooledContainer) => Promise<void>): Promise<PooledContainer> {
    const asked = this.clock.monotonic();
    this.target.claimed();
    this.retarget();
    for (;;) {
      const container = await this.borrow(asked);
      container.state = 'claimed';
      const [healthy, prepared] = await Promise.allSettled([
        this.testOnBorrow(container),
        prepare(container),
      ]);
      if (healthy.status === 'fulfilled' && healthy.value && prepared.status === 'fulfilled') {
        if (container.readyAt <= asked) this.warmClaims++;
        else {
          this.coldClaims++;
          this.target.missed();
          this.retarget();
        }
        this.detach(container);
        return container;
      }
      await this.factory
        .destroy(container)
        .catch((err: Error) =>
          this.logger.warn(`could not destroy container ${container.shortId}: ${err.message}`),
        );
      this.detach(container);
      if (prepared.status === 'rejected') throw prepared.reason;
    }
  }

  /** True when the container is warm and its runner spawns a process in time (`healthCheckTimeoutMs`). */
  private testOnBorrow(container: PooledContainer): Promise<boolean> {
    return container.state === 'destroyed' ? Promise.resolve(false) : this.factory.healthy(container);
  }

  private async borrow(asked: number): Promise<PooledContainer> {
    const timeout = () => {
      const cause = this.lastError ? `; last start failure: ${this.lastError.message}` : '';
      return new PoolExhaustedError(
        'POOL_ACQUIRE_TIMEOUT',
        `no healthy warm container within ${this.options.acquireTimeoutMs} ms${cause}; raise ` +
          `${this.options.settingNames.acquireTimeoutMs}, ${this.options.settingNames.min} or ` +
          this.options.settingNames.max,
        { acquireTimeoutMs: this.options.acquireTimeoutMs },
      );
    };
    if (this.clock.monotonic() - asked > this.options.acquireTimeoutMs) throw timeout();
    try {
      return await this.pool.acquire();
    } catch (err) {
      if ((err as Error).name === 'TimeoutError') throw timeout();
      throw err;
    }
  }

  /** Removes a claimed container from the pool, which then starts its replacement. */
  private detach(container: PooledContainer): void {
    // The pool's destroy callback leaves a claimed container alone; one the claim destroyed it only joins.
    this.pool.destroy(container).catch((err: Error) => this.logger.warn(`detach: ${err.message}`));
  }

  stats(): WarmPoolStats {
    return {
      size: this.pool.size,
      available: this.pool.available,
      borrowed: this.pool.borrowed,
      pending: this.pool.pending,
      min: this.options.min,
      target: this.pool.min,
      max: this.pool.max,
      starting: this.starting,
      consecutiveCreateFailures: this.failures,
      warmClaims: this.warmClaims,
      coldClaims: this.coldClaims,
      ...(this.lastError && { lastCreateError: this.lastError }),
    };
  }

  /** Stops refilling, fails pending claims, destroys every warm container. */
  async close(): Promise<void> {
    if (this.closing.signal.aborted) return;
    this.closing.abort();
    clearInterval(this.retargetTimer);
    // Starts waiting for a slot go now, each counted, and find the pool closing.
    for (const go of this.startQueue.splice(0)) {
      this.starting++;
      go();
    }
    await this.pool.drain();
    await this.pool.clear();
  }

  private async createWithRetry(): Promise<PooledContainer> {
    for (let attempt = 0; ; attempt++) {
      if (this.closing.signal.aborted) {
        // generic-pool re-creates at once for each waiting claim; pausing keeps that from spinning until they time out.
        await new Promise((resolve) => setTimeout(resolve, CLOSING_RETRY_MS).unref());
        throw new Error('the warm pool is closing');
      }
      try {
        const container = await this.startOne();
        if (this.closing.signal.aborted) {
          await this.factory.destroy(container);
          throw new Error('the warm pool is closing');
        }
        if (this.failures > 0)
          this.logger.log(`warm containers start again after ${this.failures} failure(s)`);
        this.failures = 0;
        void container.connection.closed.then(() => {
          if (container.state === 'warm') {
            this.logger.warn(`warm container ${container.shortId} lost its runner; replacing it`);
            void this.sweep();
          }
        });
        return container;
      } catch (err) {
        if (this.closing.signal.aborted) throw err;
        this.failures++;
        this.lastError = { message: (err as Error).message, at: this.clock.now().toISOString() };
        if (this.failures === 1 || this.failures % 20 === 0) {
          this.logger.warn(
            `warm container start failed (${this.failures} in a row): ${(err as Error).message}`,
          );
        }
        const delay = Math.min(BACKOFF_MAX_MS, BACKOFF_BASE_MS * 2 ** Math.min(attempt, 10));
        await this.sleep(delay * (0.5 + Math.random() / 2), this.closing.signal);
      }
    }
  }

  /**
   * One container start, once one of the `starts` slots is free: more at once on one host would only slow each
   * other down (and every claim waiting meanwhile). Its duration feeds the target's start time.
   */
  private async startOne(): Promise<PooledContainer> {
    // A slot freed by a start is handed to the next waiting one as it is (`starting` stays counted).
    if (this.starting < this.options.starts) this.starting++;
    else await new Promise<void>((resolve) => this.startQueue.push(resolve));
    const t0 = this.clock.monotonic();
    try {
      if (this.isClosing) throw new Error('the warm pool is closing');
      const container = await this.factory.create();
      this.target.started(this.clock.monotonic() - t0);
      return container;
    } finally {
      const next = this.startQueue.shift();
      if (next) next();
      else this.starting--;
    }
  }
}
