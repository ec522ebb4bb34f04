import { randomBytes } from 'node:crypto';
import { mkdir, readdir, rename, rm, rmdir } from 'node:fs/promises';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { type Clock, systemClock, WarmTarget } from '@switchyard/common';
import type { ImageFs, ImageOwner, LoopHost, SpareImage } from './loop-host';

export interface WorkspaceImagePoolOptions {
  /** Directory of the pool's images (`<imageDir>/.pool`): same filesystem as the workspaces' images. */
  dir: string;
  /** Where spares are mounted, one directory each: a private mount (the quota makes it one). */
  mounts: string;
  /**
   * Images kept formatted and mounted however quiet it is (the floor); 0 formats every image when its workspace is
   * created. After a burst of workspaces the pool holds the floor plus that burst, for `windowMs` (`WarmTarget`).
   */
  size: number;
  /** The most spares held after a burst. Default 16 (and never under `size`). */
  max?: number;
  /** How long a burst keeps the pool above its floor. Default 60 s. */
  windowMs?: number;
  clock?: Clock;
  /** Size of each image: the workspace cap. */
  bytes: number;
  /** Owner of each image's workspace directory. */
  owner: ImageOwner;
  /** Filesystem of the images. */
  fs: ImageFs;
  /**
   * How long after a spare is taken its replacement starts: long enough for the request that took it to finish
   * first, rather than share the CPU with a format. Default 20 ms.
   */
  refillDelayMs?: number;
}

/** Spares held after a burst, at most, by default. */
const DEFAULT_MAX_SPARES = 16;
/** How long a burst keeps the pool above its floor, by default (as the warm container pool's demand window). */
const DEFAULT_WINDOW_MS = 60_000;

/**
 * Workspace images formatted and mounted ahead of time, so that creating a capped workspace is a rename and a mount
 * move (a fraction of a millisecond in the kernel) rather than mkfs, a loop device and a mount (most of a
 * session's cold start). Spares are kept ready as the warm containers are (`WarmTarget`): the floor (`size`), plus the
 * latest burst of workspaces for `windowMs`, so the next burst like it finds one each; each one taken is replaced in
 * the background, one at a time (through the `LoopHost`, whose helper process runs mkfs: the engine's large process
 * never forks for it). Past the window the spares above the floor are unmounted, their images kept to be mounted again.
 * Images are sparse (a few MiB of metadata on disk each) and survive restarts when the cap and owner are unchanged,
 * to be mounted again; half-formatted ones and those made for other settings are deleted when the pool opens.
 * Owned by the quota that opens it: `close` stops refilling, waits for the work under way and unmounts the spares.
 */
export class WorkspaceImagePool {
  private readonly logger = new Logger('WorkspaceImagePool');
  /** Formatted images not mounted yet (kept from a previous run). */
  private readonly unmounted: string[] = [];
  private readonly spares: SpareImage[] = [];
  private filling?: Promise<void>;
  private refillTimer?: NodeJS.Timeout;
  private trimTimer?: NodeJS.Timeout;
  private trimming?: Promise<void>;
  private closed = true;
  private readonly target: WarmTarget;

  constructor(
    private readonly host: LoopHost,
    private readonly options: WorkspaceImagePoolOptions,
  ) {
    this.target = new WarmTarget(
      {
        min: options.size,
        max: Math.max(options.size, options.max ?? DEFAULT_MAX_SPARES),
        windowMs: options.windowMs ?? DEFAULT_WINDOW_MS,
      },
      options.clock ?? systemClock,
    );
  }

  /** Spares ready right now. */
  get readyCount(): number {
    return this.spares.length;
  }

  /**
   * Keeps the images of these settings (to mount them again), deletes every other file of the pool, and starts
   * filling it. The spares' mount directory must hold nothing mounted.
   */
  async open(): Promise<void> {
    this.closed = false;
    this.unmounted.length = 0;
    this.spares.length = 0;
    await mkdir(this.options.dir, { recursive: true, mode: 0o700 });
    await mkdir(this.options.mounts, { recursive: true, mode: 0o700 });
    const prefix = `${this.spec()}~`;
    for (const name of (await readdir(this.options.dir)).sort()) {
      const file = path.join(this.options.dir, name);
      if (name.startsWith(prefix) && name.endsWith('.img')) this.unmounted.push(file);
      else await rm(file, { recursive: true, force: true });
    }
    this.startFilling();
  }

  /** Spares the pool holds now: its floor plus the latest burst of takes (`WarmTarget`). */
  get targetCount(): number {
    return this.target.target();
  }

  /**
   * A spare for a workspace of `bytes` (`LoopHost.takeSpare`), or undefined when none is ready: then `format`. Counted
   * as demand either way (a miss too: the pool was one short).
   */
  take(bytes: number): SpareImage | undefined {
    if (bytes !== this.options.bytes) return undefined;
    this.target.claimed();
    const spare = this.spares.shift();
    if (!spare) this.target.missed();
    this.armTrim();
    return spare;
  }

  /** Formats an image at `image` now, for a workspace that found the pool empty. */
  format(image: string, bytes: number): Promise<void> {
    return this.host.format(image, bytes, this.options.owner, this.options.fs);
  }

  /** Prepares spares in the background, one at a time, until the target is ready; starts a little later. */
  refill(): void {
    if (this.closed || this.filling || this.refillTimer) return;
    this.refillTimer = setTimeout(() => {
      this.refillTimer = undefined;
      this.startFilling();
    }, this.options.refillDelayMs ?? 20);
    this.refillTimer.unref();
  }

  /** Stops refilling, waits for the spare under way, and unmounts the spares (their images stay for the next open). */
  async close(): Promise<void> {
    this.closed = true;
    clearTimeout(this.refillTimer);
    clearTimeout(this.trimTimer);
    this.refillTimer = undefined;
    this.trimTimer = undefined;
    await this.filling;
    await this.trimming;
    for (const spare of this.spares.splice(0)) {
      await this.host.unmount(spare.mount);
      await rmdir(spare.mount).catch(() => undefined);
    }
  }

  private startFilling(): void {
    if (this.closed || this.filling || this.spares.length >= this.target.target()) return;
    this.filling = this.fill().finally(() => (this.filling = undefined));
  }

  /** Once the window after the latest take has passed, the spares above the target are unmounted. */
  private armTrim(): void {
    clearTimeout(this.trimTimer);
    this.trimTimer = setTimeout(
      () => {
        this.trimTimer = undefined;
        if (this.closed || this.trimming) return;
        this.trimming = this.trim().finally(() => (this.trimming = undefined));
      },
      (this.options.windowMs ?? DEFAULT_WINDOW_MS) + 10,
    );
    this.trimTimer.unref();
  }

  /** Unmounts the spares above the target; their images stay formatted, first in line to be mounted again. */
  private async trim(): Promise<void> {
    while (!this.closed && !this.filling && this.spares.length > this.target.target()) {
      const spare = this.spares.pop()!;
      try {
        await this.host.unmount(spare.mount);
        await rmdir(spare.mount).catch(() => undefined);
        this.unmounted.push(spare.image);
      } catch (err) {
        this.spares.push(spare);
        this.logger.warn(`cannot unmount a spare workspace image: ${(err as Error).message}`);
        return;
      }
    }
  }

  private async fill(): Promise<void> {
    while (!this.closed && this.spares.length < this.target.target()) {
      try {
        // An image kept from a previous run may still be attached to a loop device: looked for, not fresh.
        const kept = this.unmounted.shift();
        const image = kept ?? (await this.formatOne());
        const mount = path.join(this.options.mounts, path.basename(image, '.img'));
        await mkdir(mount, { mode: 0o700 });
        try {
          await this.host.mountImage(image, mount, { fresh: kept === undefined });
        } catch (err) {
          await rmdir(mount).catch(() => undefined);
          throw err;
        }
        this.spares.push({ image, mount });
      } catch (err) {
        // Not retried in a loop: the next workspace created formats its own image and tries a refill again.
        this.logger.warn(`cannot prepare a spare workspace image: ${(err as Error).message}`);
        return;
      }
    }
  }

  private async formatOne(): Promise<string> {
    const suffix = randomBytes(6).toString('hex');
    // Renamed only once formatted: a crash mid-format leaves a `tmp~` file, deleted at the next open.
    const partial = path.join(this.options.dir, `tmp~${suffix}.img`);
    await this.host.format(partial, this.options.bytes, this.options.owner, this.options.fs);
    const image = path.join(this.options.dir, `${this.spec()}~${suffix}.img`);
    await rename(partial, image);
    return image;
  }

  /** What an image was made for, in its name: images of another filesystem, cap or owner are not handed out. */
  private spec(): string {
    const { bytes, owner, fs } = this.options;
    // ext4 images kept their name from before btrfs came: they stay usable across the upgrade.
    return `${fs === 'ext4' ? '' : `${fs}-`}${bytes}-${owner ? `${owner.uid}.${owner.gid}` : 'root'}`;
  }
}
