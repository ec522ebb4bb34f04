import { existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { type ImageOwner, LoopHost, type SpareImage } from './loop-host';
import { WorkspaceImagePool } from './workspace-image-pool';

/** A host whose formats write a marker file, one at a time under the test's control; mounts are recorded. */
class FakeHost extends LoopHost {
  readonly formats: { image: string; bytes: number; owner: ImageOwner }[] = [];
  readonly mounted = new Map<string, { image: string; fresh: boolean }>();
  private gate: Promise<void> = Promise.resolve();
  private open?: () => void;
  failNext = false;

  /** Formats wait until `release` from now on. */
  hold(): void {
    this.gate = new Promise((resolve) => (this.open = resolve));
  }

  release(): void {
    this.open?.();
    this.gate = Promise.resolve();
  }

  async format(image: string, bytes: number, owner: ImageOwner): Promise<void> {
    this.formats.push({ image, bytes, owner });
    await this.gate;
    if (this.failNext) {
      this.failNext = false;
      throw new Error('mkfs.ext4 failed: no space');
    }
    writeFileSync(image, `ext4 ${bytes}`, { flag: 'wx' });
  }

  async mountImage(image: string, target: string, opts: { fresh?: boolean } = {}): Promise<void> {
    this.mounted.set(target, { image, fresh: opts.fresh === true });
  }
  async takeSpare(): Promise<void> {}
  async removeWorkspace(): Promise<boolean> {
    return false;
  }
  async unmount(target: string): Promise<void> {
    this.mounted.delete(target);
  }
  async detachLoop(): Promise<void> {}
  async ownMount(): Promise<boolean> {
    return false;
  }
  async mountRoot(): Promise<void> {}
  async snapshot(): Promise<void> {}
  async deleteSubvolume(): Promise<void> {}
  async copyImage(): Promise<void> {}
  async thaw(): Promise<void> {}
}

const until = async (check: () => boolean): Promise<void> => {
  for (let i = 0; i < 500 && !check(); i++) await new Promise((r) => setTimeout(r, 2));
  if (!check()) throw new Error('condition not met in time');
};

describe('WorkspaceImagePool', () => {
  let dir: string;
  let mounts: string;
  let host: FakeHost;
  const owner = { uid: 65534, gid: 65534 };
  const make = (size = 2, bytes = 1024, refillDelayMs = 0, windowMs = 60_000) =>
    new WorkspaceImagePool(host, { dir, mounts, size, bytes, owner, fs: 'ext4', refillDelayMs, windowMs });

  beforeEach(() => {
    dir = path.join(mkdtempSync(path.join(tmpdir(), 'ws-pool-')), '.pool');
    mounts = path.join(path.dirname(dir), '.spares');
    host = new FakeHost();
  });
  afterEach(() => rmSync(path.dirname(dir), { recursive: true, force: true }));

  it('fills up to its size at open, one spare at a time, under names that say what they were made for', async () => {
    const pool = make(3);
    host.hold();
    await pool.open();
    expect(host.formats).toHaveLength(1); // the second waits for the first
    host.release();
    await until(() => pool.readyCount === 3);
    expect(host.formats).toHaveLength(3);
    expect(host.formats.every((f) => path.basename(f.image).startsWith('tmp~'))).toBe(true);
    expect(readdirSync(dir).every((n) => n.startsWith('1024-65534.65534~'))).toBe(true);
    // Each mounted fresh on a directory of its own under the spares' mount.
    expect([...host.mounted.values()].map((m) => m.fresh)).toEqual([true, true, true]);
    expect(readdirSync(mounts).sort()).toEqual(
      readdirSync(dir)
        .map((n) => path.basename(n, '.img'))
        .sort(),
    );
    await pool.close();
    expect(host.mounted.size).toBe(0);
    expect(readdirSync(mounts)).toEqual([]);
  });

  it('hands out a ready image, refills on demand, and formats nothing for a size it was not made for', async () => {
    const pool = make(1);
    await pool.open();
    await until(() => pool.readyCount === 1);
    const spare: SpareImage | undefined = pool.take(1024);
    expect(spare && existsSync(spare.image) && host.mounted.get(spare.mount)?.image).toBe(spare?.image);
    expect(pool.take(1024)).toBeUndefined(); // empty until refilled
    pool.refill();
    await until(() => pool.readyCount === pool.targetCount);
    const ready = pool.readyCount;
    expect(pool.take(2048)).toBeUndefined();
    expect(pool.readyCount).toBe(ready);
    expect(pool.targetCount).toBe(ready); // a take of another size is no demand for these
    await pool.format(path.join(path.dirname(dir), 'direct.img'), 2048);
    expect(host.formats.at(-1)).toMatchObject({ bytes: 2048, owner });
    await pool.close();
  });

  it('keeps ready images across a reopen and deletes half-formatted ones and those of other settings', async () => {
    const first = make(2);
    await first.open();
    await until(() => first.readyCount === 2);
    await first.close();
    const kept = readdirSync(dir).sort();
    writeFileSync(path.join(dir, 'tmp~half.img'), '');
    writeFileSync(path.join(dir, '4096-65534.65534~other.img'), '');
    const formatsBefore = host.formats.length;
    const second = make(2);
    await second.open();
    expect(readdirSync(dir).sort()).toEqual(kept);
    await until(() => second.readyCount === 2);
    expect(host.formats).toHaveLength(formatsBefore);
    // Mounted again, the loop device they may still be attached to looked for.
    expect([...host.mounted.values()]).toEqual(kept.map((n) => ({ image: path.join(dir, n), fresh: false })));
    await second.close();
  });

  it('stops refilling after a failed format and tries again at the next refill', async () => {
    const pool = make(2);
    host.failNext = true;
    await pool.open();
    await until(() => host.formats.length === 1);
    await new Promise((r) => setTimeout(r, 20));
    expect(pool.readyCount).toBe(0);
    expect(readdirSync(dir)).toEqual([]); // nothing half-made is left
    pool.refill();
    await until(() => pool.readyCount === 2);
    await pool.close();
  });

  it('close waits for the format under way and starts no other; its image is kept for the next open', async () => {
    const pool = make(3);
    host.hold();
    await pool.open();
    let closed = false;
    const closing = pool.close().then(() => (closed = true));
    await new Promise((r) => setTimeout(r, 20));
    expect(closed).toBe(false);
    host.release();
    await closing;
    expect(host.formats).toHaveLength(1);
    expect(readdirSync(dir)).toHaveLength(1);
    expect(host.mounted.size).toBe(0);
    pool.refill(); // closed: nothing more
    expect(host.formats).toHaveLength(1);
  });

  it('starts a replacement only a little after a take, and leaves no timer behind when closed', async () => {
    const pool = make(1, 1024, 50);
    await pool.open(); // the first fill starts at once
    await until(() => pool.readyCount === 1);
    const formats = host.formats.length;
    pool.take(1024);
    pool.refill();
    await new Promise((r) => setTimeout(r, 20));
    expect(host.formats).toHaveLength(formats); // the request that took it finishes first
    await until(() => pool.readyCount === pool.targetCount);
    expect(host.formats).toHaveLength(formats + 2); // the one taken, and one more for the burst it was
    pool.take(1024);
    pool.refill();
    await pool.close();
    await new Promise((r) => setTimeout(r, 80));
    expect(host.formats).toHaveLength(formats + 2);
  });

  it('holds the latest burst of workspaces beside its floor, then unmounts the extra spares and mounts them again', async () => {
    const pool = make(2, 1024, 0, 150);
    await pool.open();
    await until(() => pool.readyCount === 2);
    // A burst of five workspaces: two found a spare, three formatted their own.
    const taken = Array.from({ length: 5 }, () => pool.take(1024));
    expect(taken.filter(Boolean)).toHaveLength(2);
    expect(pool.targetCount).toBe(7); // the floor + the burst of five
    pool.refill();
    await until(() => pool.readyCount === 7);
    const formats = host.formats.length;
    // The same burst again finds a spare each.
    expect(Array.from({ length: 5 }, () => pool.take(1024)).every(Boolean)).toBe(true);
    pool.refill();
    await until(() => pool.readyCount === pool.targetCount);
    expect(pool.readyCount).toBe(12); // both bursts within a second are one burst of ten
    // Past the window: back to the floor, the other images unmounted but kept, not formatted anew when needed.
    const mountedAtPeak = host.mounted.size;
    await until(() => pool.targetCount === 2 && pool.readyCount === 2);
    expect(host.mounted.size).toBe(mountedAtPeak - 10);
    const before = host.formats.length;
    expect(before).toBe(formats + 10);
    expect(Array.from({ length: 4 }, () => pool.take(1024)).filter(Boolean)).toHaveLength(2);
    pool.refill();
    await until(() => pool.readyCount === pool.targetCount);
    // The ten unmounted images were mounted again first; only the rest of the target was formatted.
    expect([...host.mounted.values()].filter((m) => !m.fresh)).toHaveLength(10);
    expect(host.formats.length - before).toBe(pool.targetCount - 10);
    await pool.close();
  });
});
