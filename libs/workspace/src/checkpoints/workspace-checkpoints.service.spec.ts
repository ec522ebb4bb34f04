import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  lstatSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  readlinkSync,
  rmSync,
  statfsSync,
  statSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { mountsBelow } from '../mount-table';
import { WorkspaceManager } from '../workspace-manager.service';
import { LoopImageQuota, NoWorkspaceQuota, type WorkspaceQuota } from '../workspace-quota';
import { WorkspaceUsage } from '../workspace-usage';
import { CheckpointError } from '../workspace.errors';
import { resolveWorkspaceOptions, type WorkspaceOptions } from '../workspace.options';
import { WorkspaceCheckpoints } from './workspace-checkpoints.service';

if (process.getuid?.() !== 0) throw new Error('checkpoint tests run as root, like the engine');

const MiB = 2 ** 20;
const UID = 10001;

/** Every entry with type, mode, owner, mtime and contents or target: what a restore must bring back exactly. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (rel: string) => {
    for (const name of readdirSync(path.join(dir, rel)).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const full = path.join(dir, r);
      const st = lstatSync(full);
      const meta = `${(st.mode & 0o7777).toString(8)} ${st.uid}:${st.gid} ${st.mtimeMs}`;
      if (st.isSymbolicLink()) out[r] = `link ${readlinkSync(full)}`;
      else if (st.isDirectory()) {
        out[r] = `dir ${meta}`;
        walk(r);
      } else out[r] = `file ${meta} ${readFileSync(full, 'utf8')}`;
    }
  };
  walk('');
  return out;
}

/** A workspace as code leaves it: files, nested directories, modes, links inside and out, the sandbox's uid. */
function populate(dir: string): void {
  mkdirSync(path.join(dir, 'src/pkg'), { recursive: true });
  writeFileSync(path.join(dir, 'src/app.py'), 'print("v1")\n');
  writeFileSync(path.join(dir, 'src/pkg/__init__.py'), '');
  writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\n');
  chmodSync(path.join(dir, 'run.sh'), 0o755);
  mkdirSync(path.join(dir, 'secret'));
  chmodSync(path.join(dir, 'secret'), 0o700);
  writeFileSync(path.join(dir, 'secret/token'), 't');
  symlinkSync('src/app.py', path.join(dir, 'app'));
  symlinkSync('../etc/hosts', path.join(dir, 'up'));
  execFileSync('chown', ['-R', `${UID}:${UID}`, dir]);
}

/** What a failed action does: half-writes, deletes, adds, changes a mode, swaps a file for a link. */
function mess(dir: string): void {
  writeFileSync(path.join(dir, 'src/app.py'), 'print("v2"'); // half-written
  rmSync(path.join(dir, 'src/pkg'), { recursive: true });
  writeFileSync(path.join(dir, 'new.txt'), 'added');
  mkdirSync(path.join(dir, 'build/out'), { recursive: true });
  chmodSync(path.join(dir, 'run.sh'), 0o600);
  rmSync(path.join(dir, 'secret/token'));
  symlinkSync('/etc/passwd', path.join(dir, 'secret/token'));
}

type Setup = 'btrfs images' | 'ext4 images' | 'uncapped directories';

describe.each<[Setup, 'snapshot' | 'copy']>([
  ['btrfs images', 'snapshot'],
  ['ext4 images', 'copy'],
  ['uncapped directories', 'copy'],
])('WorkspaceCheckpoints on %s (%s store, real files)', (setup, kind) => {
  let base: string;
  let options: WorkspaceOptions;
  let quota: WorkspaceQuota;
  let workspaces: WorkspaceManager;
  let checkpoints: WorkspaceCheckpoints;

  const start = async (limits: { max?: number; keepAuto?: number } = {}) => {
    options = resolveWorkspaceOptions({
      root: path.join(base, 'workspaces'),
      sandboxUid: UID,
      sandboxGid: UID,
      limits: { maxWorkspaceBytes: 64 * MiB },
      imagePool: 0,
      checkpoints: limits,
    });
    quota =
      setup === 'uncapped directories'
        ? new NoWorkspaceQuota()
        : new LoopImageQuota({
            root: options.root,
            imageDir: options.imageDir,
            bytes: options.limits.maxWorkspaceBytes,
            owner: { uid: UID, gid: UID },
            poolSize: 0,
            fs: setup === 'btrfs images' ? 'btrfs' : 'ext4',
          });
    workspaces = new WorkspaceManager(options, new WorkspaceUsage(), quota);
    checkpoints = new WorkspaceCheckpoints(options, workspaces, quota);
    await checkpoints.onModuleInit();
  };
  const stop = async () => {
    await checkpoints.onApplicationShutdown();
    await workspaces.onApplicationShutdown();
  };

  beforeEach(async () => {
    base = mkdtempSync(path.join(tmpdir(), 'checkpoints-'));
    await start();
  });
  afterEach(async () => {
    await stop();
    for (const m of mountsBelow(base)) execFileSync('umount', ['-l', m]);
    rmSync(base, { recursive: true, force: true });
  });

  it('takes a checkpoint and restores the exact tree after changes, deletes and additions, in place', async () => {
    const dir = await workspaces.create('ses_a');
    populate(dir);
    writeFileSync(path.join(dir, 'keep.txt'), 'kept');
    const before = tree(dir);
    const { checkpoint, pruned } = await checkpoints.create('ses_a', { label: 'clean' });
    expect(checkpoint).toMatchObject({
      sessionId: 'ses_a',
      label: 'clean',
      auto: false,
      files: 7,
      directories: 4, // with the session's home (`.home`), which every workspace holds
    });
    expect(checkpoint.id).toMatch(/^chk_[0-9a-f]{24}$/);
    expect(checkpoint.bytes).toBe(12 + 10 + 1 + 4);
    expect(pruned).toEqual([]);
    expect(await checkpoints.kindOf('ses_a')).toBe(kind);
    const untouched = statSync(path.join(dir, 'keep.txt')).ino;
    const rootIno = statSync(dir).ino;

    mess(dir);
    expect(tree(dir)).not.toEqual(before);
    const { stats } = await checkpoints.restore('ses_a', checkpoint.id);
    expect(tree(dir)).toEqual(before);
    expect(stats.removed).toBeGreaterThanOrEqual(3);
    expect(statSync(dir).ino).toBe(rootIno); // the same directory: kernels and mounts keep seeing it
    expect(statSync(path.join(dir, 'keep.txt')).ino).toBe(untouched); // what did not change is not rewritten
    if (kind === 'snapshot') expect(stats.bytesCopied).toBe(0); // every file came back as a reflink
    // Restoring again changes nothing; the checkpoint itself is intact.
    expect((await checkpoints.restore('ses_a', checkpoint.id)).stats).toMatchObject({ removed: 0 });
  });

  it('lists, gets and deletes; unknown or malformed ids are 404s that touch no path', async () => {
    await workspaces.create('ses_b');
    const a = (await checkpoints.create('ses_b', { label: 'a' })).checkpoint;
    const b = (await checkpoints.create('ses_b')).checkpoint;
    expect((await checkpoints.list('ses_b')).map((c) => c.id)).toEqual([a.id, b.id]);
    expect(await checkpoints.get('ses_b', b.id)).toEqual(b);
    expect(await checkpoints.remove('ses_b', a.id)).toEqual(a);
    expect((await checkpoints.list('ses_b')).map((c) => c.id)).toEqual([b.id]);
    for (const id of [a.id, 'chk_../../etc', '../x', 'chk_' + '0'.repeat(24)]) {
      await expect(checkpoints.get('ses_b', id)).rejects.toMatchObject({ code: 'CHECKPOINT_NOT_FOUND' });
      await expect(checkpoints.restore('ses_b', id)).rejects.toBeInstanceOf(CheckpointError);
      await expect(checkpoints.remove('ses_b', id)).rejects.toMatchObject({ kind: 'not_found' });
    }
    await workspaces.create('ses_other');
    await expect(checkpoints.get('ses_other', b.id)).rejects.toMatchObject({ code: 'CHECKPOINT_NOT_FOUND' });
  });

  it('diffs a checkpoint against the workspace now and against another checkpoint', async () => {
    const dir = await workspaces.create('ses_d');
    populate(dir);
    const first = (await checkpoints.create('ses_d')).checkpoint;
    writeFileSync(path.join(dir, 'src/app.py'), 'print("v1")\nprint("v2")\n');
    writeFileSync(path.join(dir, 'notes.md'), '# notes\n');
    rmSync(path.join(dir, 'run.sh'));
    const now = await checkpoints.diff('ses_d', first.id, 'current');
    expect(now).toMatchObject({ from: first.id, to: 'current', truncated: false });
    expect(now.added).toEqual([{ path: 'notes.md', type: 'file', size: 8 }]);
    expect(now.removed).toEqual([{ path: 'run.sh', type: 'file', size: 10 }]);
    expect(now.modified).toEqual([
      expect.objectContaining({
        path: 'src/app.py',
        sizeBefore: 12,
        sizeAfter: 24,
        diff: expect.stringContaining('+print("v2")'),
      }),
    ]);
    const second = (await checkpoints.create('ses_d')).checkpoint;
    const between = await checkpoints.diff('ses_d', first.id, second.id);
    expect(between.added.map((e) => e.path)).toEqual(['notes.md']);
    expect((await checkpoints.diff('ses_d', second.id, 'current')).modified).toEqual([]);
    await expect(checkpoints.diff('ses_d', first.id, 'chk_' + 'f'.repeat(24))).rejects.toMatchObject({
      code: 'CHECKPOINT_NOT_FOUND',
    });
  });

  it('forks at now and at a checkpoint: copies isolated both ways, with no checkpoints of their own', async () => {
    const dir = await workspaces.create('ses_f');
    populate(dir);
    const at = (await checkpoints.create('ses_f')).checkpoint;
    const atCheckpoint = tree(dir);
    writeFileSync(path.join(dir, 'later.txt'), 'after the checkpoint');
    const now = tree(dir);

    await checkpoints.fork('ses_f', undefined, 'ses_g');
    await checkpoints.fork('ses_f', at.id, 'ses_h');
    const g = workspaces.dirOf('ses_g');
    const h = workspaces.dirOf('ses_h');
    expect(tree(g)).toEqual(now);
    expect(tree(h)).toEqual(atCheckpoint);
    expect(await checkpoints.list('ses_g')).toEqual([]);
    expect(await checkpoints.list('ses_h')).toEqual([]);
    writeFileSync(path.join(g, 'src/app.py'), 'fork');
    writeFileSync(path.join(dir, 'src/app.py'), 'source');
    expect(readFileSync(path.join(g, 'src/app.py'), 'utf8')).toBe('fork');
    expect(readFileSync(path.join(h, 'src/app.py'), 'utf8')).toBe('print("v1")\n');
    expect(readFileSync(path.join(dir, 'src/app.py'), 'utf8')).toBe('source');
    // The fork's own checkpoints work, and the source's are untouched.
    expect((await checkpoints.create('ses_g')).checkpoint.sessionId).toBe('ses_g');
    expect((await checkpoints.list('ses_f')).map((c) => c.id)).toEqual([at.id]);
    await expect(checkpoints.fork('ses_f', 'chk_' + '1'.repeat(24), 'ses_i')).rejects.toMatchObject({
      code: 'CHECKPOINT_NOT_FOUND',
    });
    expect(existsSync(workspaces.dirOf('ses_i'))).toBe(false);
  });

  it('refuses a checkpoint past the limit, prunes automatic ones to keepAuto, and replaces the oldest at the limit', async () => {
    await stop();
    await start({ max: 4, keepAuto: 2 });
    await workspaces.create('ses_l');
    const manual = (await checkpoints.create('ses_l')).checkpoint;
    const auto = [];
    for (let i = 0; i < 3; i++)
      auto.push(await checkpoints.create('ses_l', { auto: true, actionId: `act_${i}` }));
    expect(auto[2].pruned).toEqual([auto[0].checkpoint.id]); // keep the last 2 automatic ones
    expect((await checkpoints.list('ses_l')).map((c) => c.id)).toEqual([
      manual.id,
      auto[1].checkpoint.id,
      auto[2].checkpoint.id,
    ]);
    await checkpoints.create('ses_l', { label: 'fourth' });
    await expect(checkpoints.create('ses_l')).rejects.toMatchObject({
      code: 'CHECKPOINT_LIMIT',
      kind: 'conflict',
      details: expect.objectContaining({ setting: 'SWITCHYARD_MAX_CHECKPOINTS', limit: 4 }),
    });
    // An automatic one at the limit makes room by pruning the oldest automatic one.
    const replacing = await checkpoints.create('ses_l', { auto: true });
    expect(replacing.pruned).toEqual([auto[1].checkpoint.id]);
    expect(await checkpoints.list('ses_l')).toHaveLength(4);
  });

  it('never lists a checkpoint a crash cut short, and sweeps what it left', async () => {
    const dir = await workspaces.create('ses_c');
    populate(dir);
    const whole = (await checkpoints.create('ses_c')).checkpoint;
    const second = (await checkpoints.create('ses_c')).checkpoint;
    // The crash states a store can be left in: a tree without its record, and a record without its tree.
    const store =
      kind === 'snapshot'
        ? path.join(options.imageDir, '.roots', 'ses_c', 'checkpoints')
        : path.join(options.imageDir, '.checkpoints', 'ses_c');
    rmSync(path.join(store, `${second.id}.json`));
    writeFileSync(
      path.join(store, 'chk_' + 'a'.repeat(24) + '.json'),
      JSON.stringify({ ...whole, id: 'chk_' + 'a'.repeat(24) }),
    );
    writeFileSync(path.join(store, `.${whole.id}.json~torn`), '{"id":');
    await stop();
    await start();
    await workspaces.create('ses_c');
    expect((await checkpoints.list('ses_c')).map((c) => c.id)).toEqual([whole.id]);
    expect(readdirSync(store).sort()).toEqual([whole.id, `${whole.id}.json`].sort());
    mess(dir);
    await checkpoints.restore('ses_c', whole.id);
    expect(readFileSync(path.join(dir, 'src/app.py'), 'utf8')).toBe('print("v1")\n');
  });

  if (setup === 'btrfs images') {
    it('costs almost nothing for an unchanged workspace, and what changes after it counts against the cap', async () => {
      const dir = await workspaces.create('ses_q');
      writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(20 * MiB, 7));
      chownSync(path.join(dir, 'big.bin'), UID, UID);
      execFileSync('sync', ['-f', dir]);
      const used = () => {
        const s = statfsSync(dir);
        return (s.blocks - s.bfree) * s.bsize;
      };
      const before = used();
      await checkpoints.create('ses_q');
      execFileSync('sync', ['-f', dir]);
      expect(used() - before).toBeLessThan(0.05 * 20 * MiB);
      // Rewriting the file now keeps the checkpoint's copy: 20 + 20 MiB of the 64 MiB cap, so 30 more do not fit.
      writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(20 * MiB, 8));
      expect(() => writeFileSync(path.join(dir, 'more.bin'), Buffer.alloc(30 * MiB, 9))).toThrow(/ENOSPC/);
    });
  }
});
