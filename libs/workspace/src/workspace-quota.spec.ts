import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { isMountPoint, LoopImageQuota } from './workspace-quota';

const MiB = 2 ** 20;

// `npm test` runs as root on a machine with loop devices (the engine's own requirement for capped workspaces).
const usable = LoopImageQuota.usable();
if (!usable.ok) throw new Error(`workspace quota tests cannot run: ${usable.reason}`);

describe('LoopImageQuota (real loop mounts)', () => {
  let base: string;
  let root: string;
  let quota: LoopImageQuota;
  beforeEach(() => {
    base = mkdtempSync(path.join(tmpdir(), 'ws-quota-'));
    root = path.join(base, 'workspaces');
    mkdirSync(root);
    quota = new LoopImageQuota(path.join(base, 'images'), { uid: 10001, gid: 10001 });
  });
  afterEach(async () => {
    await quota.detachAll(root);
    rmSync(base, { recursive: true, force: true });
  });

  it('caps what anything writes in the workspace, and starts it empty', async () => {
    const dir = path.join(root, 'ses_a');
    mkdirSync(dir);
    await quota.provision('ses_a', dir, 16 * MiB);
    expect(isMountPoint(dir)).toBe(true);
    expect(readdirSync(dir)).toEqual([]);
    writeFileSync(path.join(dir, 'fits.bin'), Buffer.alloc(8 * MiB));
    expect(() => writeFileSync(path.join(dir, 'too-much.bin'), Buffer.alloc(16 * MiB))).toThrow(/ENOSPC/);
  });

  it('keeps the data across a detach and a new provision (engine restart), and frees it on release', async () => {
    const dir = path.join(root, 'ses_b');
    mkdirSync(dir);
    await quota.provision('ses_b', dir, 16 * MiB);
    writeFileSync(path.join(dir, 'kept.txt'), 'kept');
    await quota.detachAll(root);
    expect(isMountPoint(dir)).toBe(false);
    expect(readdirSync(dir)).toEqual([]);
    await quota.provision('ses_b', dir, 16 * MiB);
    expect(readdirSync(dir)).toEqual(['kept.txt']);
    await quota.provision('ses_b', dir, 16 * MiB); // idempotent while mounted
    await quota.release('ses_b', dir);
    expect(isMountPoint(dir)).toBe(false);
    expect(existsSync(path.join(base, 'images', 'ses_b.img'))).toBe(false);
  });

  it('leaves a workspace that already holds files uncapped rather than hiding them', async () => {
    const dir = path.join(root, 'ses_c');
    mkdirSync(dir);
    writeFileSync(path.join(dir, 'old.txt'), 'old');
    await quota.provision('ses_c', dir, 16 * MiB);
    expect(isMountPoint(dir)).toBe(false);
    expect(readdirSync(dir)).toEqual(['old.txt']);
  });
});
