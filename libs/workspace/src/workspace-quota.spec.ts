import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { CommandLoopHost, type ImageFs, type LoopHost } from './loop-host';
import { HelperLoopHost } from './loop-host-helper';
import { loopsBackedBy, mountsBelow, ownMounts, parseMountInfo } from './mount-table';
import { isMountPoint, LoopImageQuota, type LoopImageQuotaOptions } from './workspace-quota';

const MiB = 2 ** 20;

// `npm test` runs as root on a machine with loop devices (the engine's own requirement for capped workspaces).
const usable = LoopImageQuota.usable();
if (!usable.ok) throw new Error(`workspace quota tests cannot run: ${usable.reason}`);

const until = async (check: () => boolean, withinMs = 10_000): Promise<void> => {
  const deadline = Date.now() + withinMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
};

/** Unmounts whatever a test (or a simulated crash) left under `dir`, deepest first, then removes it. */
function removeAll(dir: string): void {
  for (const target of [...mountsBelow(dir), ...(isMountPoint(dir) ? [dir] : [])]) {
    execFileSync('umount', ['-l', target]);
  }
  rmSync(dir, { recursive: true, force: true });
}

describe.each<[string, ImageFs, () => LoopHost]>([
  ['helper process', 'btrfs', () => new HelperLoopHost()],
  ['helper process', 'ext4', () => new HelperLoopHost()],
  ['util-linux commands', 'btrfs', () => new CommandLoopHost()],
  ['util-linux commands', 'ext4', () => new CommandLoopHost()],
])('LoopImageQuota through %s, %s images (real loop mounts)', (_name, fs, makeHost) => {
  let base: string;
  let root: string;
  let imageDir: string;
  const quotas: LoopImageQuota[] = [];
  const make = (o: Partial<LoopImageQuotaOptions> = {}) => {
    const q = new LoopImageQuota(
      { root, imageDir, bytes: 16 * MiB, owner: { uid: 10001, gid: 10001 }, poolSize: 0, fs, ...o },
      makeHost(),
    );
    quotas.push(q);
    return q;
  };
  const workspace = (id: string) => {
    const dir = path.join(root, id);
    mkdirSync(dir, { recursive: true });
    return dir;
  };

  beforeEach(() => {
    base = mkdtempSync(path.join(tmpdir(), 'ws-quota-'));
    root = path.join(base, 'workspaces');
    imageDir = path.join(base, 'images');
    mkdirSync(root);
  });
  afterEach(async () => {
    for (const q of quotas.splice(0)) await q.close();
    removeAll(base);
  });

  it('caps what anything writes in the workspace, and starts it empty', async () => {
    const quota = make();
    const dir = workspace('ses_a');
    await quota.provision('ses_a', dir, 16 * MiB);
    expect(isMountPoint(dir)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
    writeFileSync(path.join(dir, 'fits.bin'), Buffer.alloc(8 * MiB));
    expect(() => writeFileSync(path.join(dir, 'too-much.bin'), Buffer.alloc(16 * MiB))).toThrow(/ENOSPC/);
  });

  it('keeps the data across a close and a new quota (engine restart), and frees it on release', async () => {
    const dir = workspace('ses_b');
    const first = make();
    await first.provision('ses_b', dir, 16 * MiB);
    writeFileSync(path.join(dir, 'kept.txt'), 'kept');
    await first.close();
    expect(isMountPoint(dir)).toBe(false);
    expect(isMountPoint(root)).toBe(false); // the root bind this engine made goes with it
    expect(readdirSync(dir)).toEqual([]);
    const second = make();
    await second.provision('ses_b', dir, 16 * MiB);
    expect(readdirSync(dir)).toEqual(['kept.txt']);
    await second.provision('ses_b', dir, 16 * MiB); // idempotent while mounted
    expect(await second.release('ses_b', dir)).toBe(true);
    expect(existsSync(path.join(imageDir, 'ses_b.img'))).toBe(false);
    expect(existsSync(dir)).toBe(false); // unmounted and removed at once; the storage is freed in the background
    await until(() => readdirSync(path.join(imageDir, '.trash')).length === 0);
    await until(() => loopsBackedBy(imageDir).length === 0);
    expect(await second.release('ses_b', dir)).toBe(false); // nothing left: the caller's directory to remove
  });

  it('leaves a workspace that already holds files uncapped rather than hiding them', async () => {
    const dir = workspace('ses_c');
    writeFileSync(path.join(dir, 'old.txt'), 'old');
    await make().provision('ses_c', dir, 16 * MiB);
    expect(isMountPoint(dir)).toBe(false);
    expect(readdirSync(dir)).toEqual(['old.txt']);
  });

  it('makes the root a mount of its own in a new shared peer group', async () => {
    await make().recover();
    const entry = ownMounts().findLast((m) => m.target === root);
    expect(entry?.shared).toBe(true);
    const group = (line?: string) => /shared:(\d+)/.exec(line ?? '')?.[1];
    const rootLine = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .findLast((l) => l.split(' ')[4] === root);
    const parentLine = readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .find((l) => l.split(' ')[0] === rootLine?.split(' ')[1]);
    expect(group(rootLine)).toBeDefined();
    expect(group(rootLine)).not.toBe(group(parentLine));
  });

  it('hands out pre-formatted, mounted spares, refills the pool, and keeps its images across restarts', async () => {
    const poolDir = path.join(imageDir, '.pool');
    const spareMounts = path.join(root, '.spares');
    const quota = make({ poolSize: 2 });
    await quota.recover();
    await until(() => quota.spareImages === 2);
    const images = readdirSync(poolDir).sort();
    const spec = `${fs === 'btrfs' ? 'btrfs-' : ''}16777216-10001\\.10001~`;
    expect(images).toEqual([expect.stringMatching(new RegExp(`^${spec}`)), expect.any(String)]);
    const spareDirs = readdirSync(spareMounts).sort();
    expect(spareDirs).toEqual(images.map((f) => path.basename(f, '.img')));
    for (const d of spareDirs) expect(isMountPoint(path.join(spareMounts, d))).toBe(true);
    expect(ownMounts().findLast((m) => m.target === spareMounts)?.shared).toBe(false); // mounts move only from there

    const dir = workspace('ses_p');
    await quota.provision('ses_p', dir, 16 * MiB);
    expect(isMountPoint(dir)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
    expect(readdirSync(poolDir).filter((f) => images.includes(f))).toHaveLength(1); // one was taken…
    expect(existsSync(path.join(imageDir, 'ses_p.img'))).toBe(true);
    // …moved, not copied (its directory goes right after).
    await until(() => readdirSync(spareMounts).filter((d) => spareDirs.includes(d)).length === 1);
    expect(ownMounts().findLast((m) => m.target === dir)?.shared).toBe(true); // in the root's propagation
    await until(() => quota.spareImages === 3); // the floor of 2, plus the burst of one workspace
    await quota.close();
    expect(mountsBelow(root)).toEqual([]);

    // A partial format and an image made for another cap do not survive the next start; the others are mounted
    // again, not formatted again.
    const kept = readdirSync(poolDir).sort();
    writeFileSync(path.join(poolDir, 'tmp~dead.img'), '');
    writeFileSync(path.join(poolDir, '999-10001.10001~old.img'), '');
    const next = make({ poolSize: 2 });
    await next.recover();
    expect(readdirSync(poolDir).sort()).toEqual(kept);
    await until(() => next.spareImages === 2);
    expect(readdirSync(poolDir).sort()).toEqual(kept);
  });

  it('finishes a deletion a crash interrupted, and never brings its data back', async () => {
    const dir = workspace('ses_d');
    const crashed = make();
    await crashed.provision('ses_d', dir, 16 * MiB);
    writeFileSync(path.join(dir, 'secret.txt'), 'gone');
    // The crash: the image was moved to the trash (a deletion's point of no return), nothing after that ran.
    mkdirSync(path.join(imageDir, '.trash'), { recursive: true });
    execFileSync('mv', [path.join(imageDir, 'ses_d.img'), path.join(imageDir, '.trash', 'ses_d~x.img')]);
    quotas.splice(0); // a crashed engine closes nothing

    const next = make();
    await next.recover();
    expect(isMountPoint(dir)).toBe(false);
    expect(existsSync(dir)).toBe(false);
    expect(readdirSync(path.join(imageDir, '.trash'))).toEqual([]);
    await next.provision('ses_d', workspace('ses_d'), 16 * MiB); // made again, it starts empty
    expect(readdirSync(dir)).toEqual([]);
    await until(() => loopsBackedBy(imageDir).length === 1);
  });

  it('detaches, at start-up, loop devices of its images that nothing mounts any more', async () => {
    const dir = workspace('ses_l');
    await make().provision('ses_l', dir, 16 * MiB);
    quotas.splice(0); // crash
    execFileSync('umount', [dir]);
    // Attached without a mount and without auto-clear, as a crashed `mount` or an operator's losetup leaves it.
    const device = execFileSync('losetup', ['--find', '--show', path.join(imageDir, 'ses_l.img')])
      .toString()
      .trim();
    expect(loopsBackedBy(imageDir).map((l) => l.path)).toEqual([device]);
    await make().recover();
    expect(loopsBackedBy(imageDir)).toEqual([]);
  });

  if (fs === 'btrfs') {
    // The top level of a btrfs image (checkpoints live there) and forks' image copies.
    it('mounts the top level for the engine alone, once, in a peer group of its own; release unmounts it', async () => {
      const quota = make();
      const dir = workspace('ses_r');
      await quota.provision('ses_r', dir, 16 * MiB);
      const [a, b] = await Promise.all([quota.rootOf('ses_r'), quota.rootOf('ses_r')]);
      expect(a).toBe(path.join(imageDir, '.roots', 'ses_r'));
      expect(b).toBe(a);
      expect(mountsBelow(quota.rootsDir)).toEqual([a]); // mounted once
      expect(readdirSync(a!).sort()).toEqual(['checkpoints', 'ws']);
      writeFileSync(path.join(dir, 'f.txt'), 'x');
      expect(readFileSync(path.join(a!, 'ws', 'f.txt'), 'utf8')).toBe('x'); // the same filesystem
      expect(ownMounts().findLast((m) => m.target === quota.rootsDir)?.shared).toBe(true);
      expect(await quota.rootOf('ses_none')).toBeNull(); // no image
      await quota.release('ses_r', dir);
      expect(isMountPoint(a!)).toBe(false);
      expect(existsSync(a!)).toBe(false);
      await until(() => loopsBackedBy(imageDir).length === 0);
    });

    it("copies a workspace's image into a new session's, which mounts beside it and is isolated both ways", async () => {
      const quota = make();
      const src = workspace('ses_s');
      await quota.provision('ses_s', src, 16 * MiB);
      writeFileSync(path.join(src, 'shared.txt'), 'at fork');
      let fixedUp: string[] = [];
      await quota.copyImage('ses_s', 'ses_f', async (copyRoot) => {
        fixedUp = readdirSync(copyRoot).sort();
      });
      expect(fixedUp).toEqual(['checkpoints', 'ws']);
      const dst = workspace('ses_f');
      await quota.provision('ses_f', dst, 16 * MiB);
      expect(readFileSync(path.join(dst, 'shared.txt'), 'utf8')).toBe('at fork');
      writeFileSync(path.join(dst, 'shared.txt'), 'fork');
      writeFileSync(path.join(src, 'shared.txt'), 'source');
      expect(readFileSync(path.join(dst, 'shared.txt'), 'utf8')).toBe('fork');
      expect(readFileSync(path.join(src, 'shared.txt'), 'utf8')).toBe('source');
      const leftovers = () => [
        ...readdirSync(path.join(imageDir, '.forks')),
        ...readdirSync(imageDir).filter((f) => f.startsWith('.fork~')),
      ];
      expect(leftovers()).toEqual([]);
      await expect(quota.copyImage('ses_s', 'ses_f', async () => undefined)).rejects.toThrow(/has an image/);
      // A fixup that fails leaves nothing behind.
      await expect(
        quota.copyImage('ses_s', 'ses_g', async () => {
          throw new Error('no');
        }),
      ).rejects.toThrow('no');
      expect(existsSync(path.join(imageDir, 'ses_g.img'))).toBe(false);
      expect(leftovers()).toEqual([]);
    });

    it('thaws and unmounts what a crashed engine left under .roots, and deletes half-made fork copies', async () => {
      const dir = workspace('ses_c');
      const crashed = make();
      await crashed.provision('ses_c', dir, 16 * MiB);
      const top = (await crashed.rootOf('ses_c'))!;
      writeFileSync(path.join(imageDir, '.fork~ses_x~dead.img'), 'partial');
      mkdirSync(path.join(imageDir, '.forks', 'ses_x~dead'));
      execFileSync('fsfreeze', ['--freeze', top]); // a fork cut short by the crash
      quotas.splice(0); // a crashed engine closes nothing

      const next = make();
      await next.recover();
      expect(mountsBelow(path.join(imageDir, '.roots'))).toEqual([]);
      expect(readdirSync(path.join(imageDir, '.forks'))).toEqual([]);
      expect(existsSync(path.join(imageDir, '.fork~ses_x~dead.img'))).toBe(false);
      await next.provision('ses_c', workspace('ses_c'), 16 * MiB);
      writeFileSync(path.join(dir, 'after.txt'), 'writable again'); // not frozen
      expect(await next.rootOf('ses_c')).toBe(top);
    });
  }

  describe('with a mount namespace that outlives its engine (a sandbox stuck before it left the host tree)', () => {
    let stuck: ChildProcess | undefined;
    afterEach(async () => {
      if (stuck?.exitCode === null) {
        stuck.kill('SIGKILL');
        await new Promise((r) => stuck!.once('exit', r));
      }
      stuck = undefined;
    });
    const startStuckNamespace = async (): Promise<number> => {
      // What bubblewrap makes before it pivots: a copy of the engine's tree in a new user + mount namespace,
      // slave to the host's.
      stuck = spawn('unshare', ['-U', '-m', '--propagation', 'slave', '--map-root-user', 'sleep', '600'], {
        stdio: 'ignore',
      });
      const pid = stuck.pid!;
      await until(() => {
        try {
          return readFileSync(`/proc/${pid}/cmdline`, 'utf8').startsWith('sleep');
        } catch {
          return false;
        }
      });
      return pid;
    };
    const devicesIn = (pid: number) =>
      new Set(parseMountInfo(readFileSync(`/proc/${pid}/mountinfo`, 'utf8')).map((m) => m.device));

    it('frees its copies of the workspaces when the next engine starts, and their loop devices when deleted', async () => {
      const a = workspace('ses_x');
      const b = workspace('ses_y');
      const crashed = make();
      await crashed.provision('ses_x', a, 16 * MiB);
      await crashed.provision('ses_y', b, 16 * MiB);
      const pid = await startStuckNamespace();
      const devices = loopsBackedBy(imageDir).map((l) => l.device);
      expect(devices).toHaveLength(2);
      for (const d of devices) expect(devicesIn(pid).has(d)).toBe(true);
      quotas.splice(0); // crash: nothing unmounted

      const next = make();
      await next.recover();
      // The stale mounts went, and with them the stuck namespace's copies (slaves follow their master).
      for (const d of devices) expect(devicesIn(pid).has(d)).toBe(false);
      expect(loopsBackedBy(imageDir)).toEqual([]);
      // Sessions mount their workspaces again; deleting one frees its loop device at once.
      await next.provision('ses_x', a, 16 * MiB);
      await next.provision('ses_y', b, 16 * MiB);
      await next.release('ses_x', a);
      await until(() => loopsBackedBy(imageDir).length === 1);
      expect(stuck?.exitCode).toBeNull();
      // Nothing of the crashed engine's survives its successor: not even the root mount it made.
      await next.close();
      expect(mountsBelow(base)).toEqual([]);
      expect(isMountPoint(root)).toBe(false);
    });

    it('mounts an image still held elsewhere through the same loop device (one filesystem, never two)', async () => {
      const dir = workspace('ses_h');
      const crashed = make();
      await crashed.provision('ses_h', dir, 16 * MiB);
      writeFileSync(path.join(dir, 'f.txt'), 'one');
      // A bind elsewhere (as the pooled tier makes) keeps the filesystem mounted after the workspace is unmounted.
      const held = path.join(base, 'held');
      mkdirSync(held);
      execFileSync('mount', ['--bind', dir, held]);
      quotas.splice(0);
      const next = make();
      await next.recover();
      expect(isMountPoint(dir)).toBe(false);
      await next.provision('ses_h', dir, 16 * MiB);
      const deviceOf = (target: string) => ownMounts().findLast((m) => m.target === target)?.device;
      expect(deviceOf(dir)).toBe(deviceOf(held));
      expect(loopsBackedBy(imageDir)).toHaveLength(1);
      writeFileSync(path.join(dir, 'g.txt'), 'two');
      expect(readdirSync(held).sort()).toEqual(['f.txt', 'g.txt']);
    });
  });
});
