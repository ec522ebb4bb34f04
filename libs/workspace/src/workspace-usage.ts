import { realpathSync, type Stats } from 'node:fs';
import * as path from 'node:path';
import { Injectable } from '@nestjs/common';

/**
 * How long a maintained count is trusted after the walk that produced it, even when nobody marked it
 * stale. A safety net for writes nobody reports (a process code left running, an operator): they escape
 * the cap for at most this long instead of forever. Re-walking a small workspace once a second is free;
 * for a big one the window stretches to `USAGE_AGE_PER_WALK` times the walk's own duration, so re-walks
 * never take more than a tenth of the time.
 */
export const USAGE_MAX_AGE_MS = 1000;
export const USAGE_AGE_PER_WALK = 10;
/** Workspaces whose count is kept; past this the least recently used idle ones are forgotten. */
const MAX_TRACKED = 4096;

/** What the tracker needs to know about a workspace: `realPathInside` returns both. */
export interface UsageRoot {
  realRoot: string;
  rootStat: Stats;
}

/**
 * A claim on a workspace's count for the duration of one op. Settle it exactly once, when the op is over,
 * with the change in bytes the op actually made on disk, or `undefined` when that is unknown (the count
 * is then re-measured before it is used again).
 */
export interface UsageTicket {
  settle(actualDelta: number | undefined): void;
}

interface Entry {
  /** `dev:ino` of the root the count belongs to: a workspace removed and re-created starts over. */
  id: string;
  bytes: number;
  /** `performance.now()` until which `bytes` is trusted; 0 once marked stale. */
  freshUntil: number;
  /** Bumped by `markStale`: a walk that overlapped a bump may have missed the change, so is not trusted. */
  generation: number;
  /** Ops holding a ticket, i.e. changes that may or may not be on disk yet. */
  inflight: number;
  /** The walk under way, if any; no ticket is handed out while it runs. */
  measuring?: Promise<number>;
  /** Wakes a pending walk once `inflight` drops to 0. */
  idle?: () => void;
}

/**
 * Bytes held by each workspace's regular files, kept as a running count instead of a walk per write.
 *
 * The file API's own writes, edits, moves and deletes update the count (`reserve`/`track`). Anything
 * else that changes a workspace behind the API's back, above all code actions, must be reported with
 * `markStale` (through `WorkspaceManager.markUsageStale` or `FileOperations.markUsageStale`;
 * `WorkspaceManager.snapshot`, which the engine takes around every code action, does it itself); the next
 * write then re-measures with the same bounded walk as before (`diskUsage`). A count also goes stale on
 * its own after `USAGE_MAX_AGE_MS` (longer for workspaces whose walk is slow).
 *
 * Exactness: a walk only starts once every op holding a ticket has settled, and no ticket is handed out
 * while it runs, so each API change is either on disk before the walk or added to the count after it,
 * never both or neither. The check and the reservation happen in one synchronous step, so concurrent
 * writes cannot all squeeze under the cap (one walk per write could let them).
 */
@Injectable()
export class WorkspaceUsage {
  private readonly entries = new Map<string, Entry>();

  /**
   * Hands out a ticket for an op that will change the workspace by `delta` bytes, counting it at once.
   * `check` sees the usage before the op and throws to refuse it (no ticket then). When the count is
   * stale, `measure` walks the workspace first.
   */
  async reserve(
    root: UsageRoot,
    delta: number,
    measure: () => Promise<number>,
    check: (usage: number) => void,
  ): Promise<UsageTicket> {
    const e = this.entry(root);
    let measured: number | undefined;
    for (;;) {
      if (e.measuring) {
        measured = await e.measuring; // someone else's walk: wait for it, then look again
      } else if (isFresh(e)) {
        measured = e.bytes;
        break;
      } else if (measured !== undefined) {
        // Walked for us, but marked stale meanwhile: use the walk anyway, as a walk per write would have.
        break;
      } else {
        measured = await this.measure(e, measure);
      }
    }
    // From here to the ticket nothing awaits, so no other op can slip between the check and the count.
    check(measured);
    return this.ticket(e, delta);
  }

  /** A ticket for an op whose change is only known afterwards (a delete, a move over a file). */
  async track(root: UsageRoot): Promise<UsageTicket> {
    const e = this.entry(root);
    while (e.measuring) await e.measuring.catch(() => undefined);
    return this.ticket(e, 0);
  }

  /**
   * The workspace at `workspaceDir` may have changed behind the file API's back: re-measure it before the
   * next cap check. Cheap, and safe to call any time (even for a missing or unknown directory).
   */
  markStale(workspaceDir: string): void {
    const e = this.entries.get(realPathOr(workspaceDir));
    if (!e) return;
    e.freshUntil = 0;
    e.generation++;
  }

  private entry(root: UsageRoot): Entry {
    const id = `${root.rootStat.dev}:${root.rootStat.ino}`;
    let e = this.entries.get(root.realRoot);
    if (e && e.id !== id) e = undefined;
    if (e) {
      this.entries.delete(root.realRoot); // re-inserted last: Map order is the LRU order
    } else {
      e = { id, bytes: 0, freshUntil: 0, generation: 0, inflight: 0 };
      this.evictIdle();
    }
    this.entries.set(root.realRoot, e);
    return e;
  }

  private evictIdle(): void {
    if (this.entries.size < MAX_TRACKED) return;
    for (const [key, e] of this.entries) {
      // A busy entry stays: its tickets and walk must meet the same entry.
      if (e.inflight === 0 && !e.measuring) {
        this.entries.delete(key);
        return;
      }
    }
  }

  private measure(e: Entry, measure: () => Promise<number>): Promise<number> {
    const run = async (): Promise<number> => {
      while (e.inflight > 0) await new Promise<void>((resolve) => (e.idle = resolve));
      const generation = e.generation;
      const startedAt = performance.now();
      const bytes = await measure();
      if (e.generation === generation) {
        e.bytes = bytes;
        const took = performance.now() - startedAt;
        e.freshUntil = startedAt + Math.max(USAGE_MAX_AGE_MS, USAGE_AGE_PER_WALK * took);
      }
      return bytes;
    };
    const p = run().finally(() => {
      e.measuring = undefined;
    });
    e.measuring = p;
    return p;
  }

  private ticket(e: Entry, reserved: number): UsageTicket {
    e.inflight++;
    e.bytes += reserved;
    let settled = false;
    return {
      settle: (actualDelta) => {
        if (settled) return;
        settled = true;
        if (actualDelta === undefined) {
          e.freshUntil = 0;
          e.generation++;
        } else {
          e.bytes += actualDelta - reserved;
        }
        if (--e.inflight === 0 && e.idle) {
          const wake = e.idle;
          e.idle = undefined;
          wake();
        }
      },
    };
  }
}

function isFresh(e: Entry): boolean {
  return performance.now() < e.freshUntil;
}

/** The key a workspace is tracked under: its real path (`path.resolve` of it when it cannot be resolved). */
function realPathOr(dir: string): string {
  try {
    return realpathSync.native(dir);
  } catch {
    return path.resolve(dir);
  }
}
