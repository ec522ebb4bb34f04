import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { HelperLoopHost } from './loop-host-helper';
import type { ImageFs } from './loop-host';
import { isMountPoint, loopsBackedBy, ownMounts } from './mount-table';
import { LoopImageQuota } from './workspace-quota';

const usable = LoopImageQuota.usable();
if (!usable.ok) throw new Error(`loop host tests cannot run: ${usable.reason}`);

const MiB = 2 ** 20;

describe('HelperLoopHost (real loop mounts)', () => {
  let base: string;
  let host: HelperLoopHost;
  beforeEach(() => {
    base = mkdtempSync(path.join(tmpdir(), 'ws-helper-'));
  });
  afterEach(async () => {
    await host.close();
    rmSync(base, { recursive: true, force: true });
  });

  const settled = async (check: () => boolean) => {
    for (let i = 0; i < 200 && !check(); i++) await new Promise((r) => setTimeout(r, 10));
    expect(check()).toBe(true);
  };

  const roundTrip = async (fs: ImageFs) => {
    const image = path.join(base, 'a.img');
    const target = path.join(base, 'a');
    mkdirSync(target);
    await host.format(image, 16 * MiB, { uid: 10001, gid: 10001 }, fs);
    await host.mountImage(image, target, { fresh: true });
    expect(isMountPoint(target)).toBe(true);
    expect(readdirSync(target)).toEqual([]); // no lost+found, no subvolumes: the workspace alone
    expect(statSync(target).uid).toBe(10001);
    expect(ownMounts().findLast((m) => m.target === target)?.fsType).toBe(fs);
    await host.unmount(target);
    expect(isMountPoint(target)).toBe(false);
    await host.unmount(target); // not mounted: fine
    await settled(() => loopsBackedBy(base).length === 0);

    // Removal: the image to the trash, the mount and the directory gone when it resolves, the rest later.
    await host.mountImage(image, target);
    writeFileSync(path.join(target, 'f.txt'), 'x');
    const trashed = path.join(base, 'a~trashed.img');
    expect(await host.removeWorkspace(image, trashed, target)).toBe(true);
    expect(existsSync(image) || existsSync(target)).toBe(false);
    await settled(() => !existsSync(trashed) && loopsBackedBy(base).length === 0);
    expect(await host.removeWorkspace(image, trashed, target)).toBe(false); // no image: never capped
  };

  const hosts: [string, () => HelperLoopHost][] = [
    ['its helper process', () => new HelperLoopHost()],
    ['the util-linux commands (no python3)', () => new HelperLoopHost(path.join(base, 'no-python3'))],
  ];

  describe.each(hosts)('through %s', (_name, makeHost) => {
    it.each<ImageFs>(['ext4', 'btrfs'])('formats, mounts and unmounts %s images', async (fs) => {
      host = makeHost();
      await host.start();
      await roundTrip(fs);
    });

    it('snapshots a btrfs workspace, deletes snapshots, and copies a frozen image that mounts beside it', async () => {
      host = makeHost();
      const image = path.join(base, 'b.img');
      const ws = path.join(base, 'ws');
      const root = path.join(base, 'root');
      mkdirSync(ws);
      mkdirSync(root);
      await host.format(image, 16 * MiB, null, 'btrfs');
      await host.mountImage(image, ws, { fresh: true });
      await host.mountRoot(image, root);
      expect(readdirSync(root).sort()).toEqual(['checkpoints', 'ws']);
      expect(statSync(path.join(root, 'checkpoints')).mode & 0o777).toBe(0o700);
      const deviceOf = (target: string) => ownMounts().findLast((m) => m.target === target)?.device;
      expect(deviceOf(root)).toBe(deviceOf(ws)); // one filesystem, two mounts
      writeFileSync(path.join(ws, 'f.txt'), 'before');

      const checkpoints = path.join(root, 'checkpoints');
      await host.snapshot(path.join(root, 'ws'), checkpoints, 'c1');
      writeFileSync(path.join(ws, 'f.txt'), 'after');
      expect(readFileSync(path.join(checkpoints, 'c1', 'f.txt'), 'utf8')).toBe('before');
      expect(() => writeFileSync(path.join(checkpoints, 'c1', 'g.txt'), 'x')).toThrow(/EROFS/); // read-only

      const copy = path.join(base, 'copy.img');
      await host.copyImage(image, root, copy);
      writeFileSync(path.join(ws, 'later.txt'), 'not in the copy'); // thawed
      const forked = path.join(base, 'forked');
      mkdirSync(forked);
      await host.mountImage(copy, forked, { fresh: true });
      expect(readFileSync(path.join(forked, 'f.txt'), 'utf8')).toBe('after');
      expect(existsSync(path.join(forked, 'later.txt'))).toBe(false);
      writeFileSync(path.join(forked, 'f.txt'), 'fork'); // the copy is a filesystem of its own
      expect(readFileSync(path.join(ws, 'f.txt'), 'utf8')).toBe('after');
      await host.unmount(forked);

      await host.deleteSubvolume(checkpoints, 'c1');
      expect(readdirSync(checkpoints)).toEqual([]);
      await host.thaw(root); // not frozen: fine
      await host.unmount(root);
      await host.unmount(ws);
      await settled(() => loopsBackedBy(base).length === 0);
    });
  });

  it('names the operation and the path when a call fails', async () => {
    host = new HelperLoopHost();
    const image = path.join(base, 'b.img');
    await host.format(image, 16 * MiB, null, 'ext4');
    await expect(host.mountImage(image, path.join(base, 'missing'), { fresh: true })).rejects.toThrow(
      /mount_image .*missing failed: ENOENT/,
    );
    expect(loopsBackedBy(base)).toEqual([]); // the device it attached went with the failed mount
    await expect(host.format(image, 16 * MiB, null, 'btrfs')).rejects.toThrow(
      /format .*b\.img failed: EEXIST/,
    );
    await expect(host.snapshot(path.join(base, 'nowhere'), base, 'x')).rejects.toThrow(
      /snapshot .*nowhere as .*x failed: ENOENT/,
    );
    await host.detachLoop('/dev/loop-none'); // no such device: nothing to detach
  });
});
