import * as os from 'node:os';
import type { Clock } from './clock';

/** What a warm pool's target follows. */
export interface WarmTargetOptions {
  /** The floor: warm sandboxes kept however quiet it is. 0: no warm pool at all, whatever the claims. */
  min: number;
  /** The ceiling: warm (or starting) sandboxes at most. */
  max: number;
  /** How long a burst of claims keeps the target up after it. */
  windowMs: number;
}

/** Until a start has been timed, a start is taken to last this long (a container on a busy 2-core machine). */
const FIRST_START_GUESS_MS = 1000;
/** Weight of the newest start in the running average of start times. */
const START_WEIGHT = 0.3;
/**
 * Claims this close together are one burst even when a start is quicker: sessions a client creates at once reach the
 * pool spread by their own creation (their workspaces; hundreds of milliseconds apart when 16 come together here).
 */
const MIN_BURST_SPAN_MS = 1000;

/**
 * Parallel starts of warm sandboxes by default: two per core, at least 4 (a start waits on Docker or the API server
 * as much as it computes: on 2 cores, 4 at once kept 58-59 of 60 back-to-back claims warm, 2 at once 22-23) and at
 * most 8 (past that, starts on one host only slow each other down).
 */
export function defaultWarmStarts(): number {
  return Math.min(8, Math.max(4, 2 * os.availableParallelism()));
}

/**
 * How many warm sandboxes (containers, pods) a pool should hold: its floor `min`, plus the most claims that arrived
 * within one start time (at least `MIN_BURST_SPAN_MS`) at any moment of the last `windowMs` or the claims of that window that found nothing warm,
 * whichever is more, up to `max`. Claims that close together are a burst no refill can catch up with (each
 * replacement takes a start), so only sandboxes warm before it began serve it warm: holding that many for the window
 * makes the next burst like it warm, and a steady stream of claims keeps about its rate x the start time in hand. A
 * quiet window brings the target back to `min`, so memory goes back to the floor.
 * A pool with no floor (`min` 0) is no pool: it stays empty, every claim waits for a start.
 *
 * Start times are a running average of the pool's own starts (`started`), which lengthen when the host is loaded, so
 * the same arrival rate asks for more warm sandboxes on a busy host.
 */
export class WarmTarget {
  /** Claim times within the last burst span (a start time, at least `MIN_BURST_SPAN_MS`). */
  private readonly recent: number[] = [];
  /** Bursts (claims within one start time) of the window, largest first after each newer, larger one: a max-queue. */
  private readonly peaks: Array<{ at: number; claims: number }> = [];
  /** Times of claims that found nothing warm, within the window. */
  private readonly misses: number[] = [];
  private startMs?: number;

  constructor(
    private readonly options: WarmTargetOptions,
    private readonly clock: Clock,
  ) {}

  /** Records a claim; returns the new target. */
  claimed(): number {
    const now = this.clock.monotonic();
    const since = now - Math.max(this.averageStartMs, MIN_BURST_SPAN_MS);
    this.recent.push(now);
    while (this.recent.length > 0 && this.recent[0] <= since) this.recent.shift();
    const claims = this.recent.length;
    // An older burst no larger than this one can never be the window's largest again.
    while (this.peaks.length > 0 && this.peaks[this.peaks.length - 1].claims <= claims) this.peaks.pop();
    this.peaks.push({ at: now, claims });
    return this.target();
  }

  /**
   * Records a claim that found nothing warm (it waited for a start, or got none): the pool was one short. Claims that
   * wait are spaced by starts, so a burst served cold looks small to `claimed`; its misses show how short it was.
   */
  missed(): number {
    this.misses.push(this.clock.monotonic());
    return this.target();
  }

  /** Records how long a start took (create to ready), in ms. */
  started(ms: number): void {
    this.startMs = this.startMs === undefined ? ms : this.startMs * (1 - START_WEIGHT) + ms * START_WEIGHT;
  }

  /** The running average of start times, in ms. */
  get averageStartMs(): number {
    return this.startMs ?? FIRST_START_GUESS_MS;
  }

  /**
   * Warm sandboxes to hold now: `min` + the window's largest burst or its misses, whichever is more, at most `max`
   * (0 when `min` is 0).
   */
  target(): number {
    if (this.options.min === 0) return 0;
    const since = this.clock.monotonic() - this.options.windowMs;
    while (this.peaks.length > 0 && this.peaks[0].at < since) this.peaks.shift();
    while (this.misses.length > 0 && this.misses[0] < since) this.misses.shift();
    const burst = Math.max(this.peaks[0]?.claims ?? 0, this.misses.length);
    return Math.min(this.options.max, this.options.min + burst);
  }
}
