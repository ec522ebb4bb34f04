import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { HelperLoopHost } from './loop-host-helper';
import { isMountPoint, loopsBackedBy } from './mount-table';
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

  const roundTrip = async () => {
    const image = path.join(base, 'a.img');
    const target = path.join(base, 'a');
    mkdirSync(target);
    await host.format(image, 16 * MiB, { uid: 10001, gid: 10001 });
    await host.mountImage(image, target, { fresh: true });
    expect(isMountPoint(target)).toBe(true);
    expect(readdirSync(target)).toEqual([]); // no lost+found
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

  it('formats, mounts and unmounts through its helper process', async () => {
    host = new HelperLoopHost();
    await host.start();
    await roundTrip();
  });

  it('falls back to the util-linux commands where python3 cannot run', async () => {
    host = new HelperLoopHost(path.join(base, 'no-python3'));
    await host.start();
    await roundTrip();
  });

  it('names the operation and the path when a call fails', async () => {
    host = new HelperLoopHost();
    const image = path.join(base, 'b.img');
    await host.format(image, 16 * MiB, null);
    await expect(host.mountImage(image, path.join(base, 'missing'), { fresh: true })).rejects.toThrow(
      /mount_image .*missing failed: ENOENT/,
    );
    expect(loopsBackedBy(base)).toEqual([]); // the device it attached went with the failed mount
    await expect(host.format(image, 16 * MiB, null)).rejects.toThrow(/format .*b\.img failed: EEXIST/);
    await host.detachLoop('/dev/loop-none'); // no such device: nothing to detach
  });
});
