import { execFileSync } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  existsSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import * as path from 'node:path';
import { type Headers, pack } from 'tar-stream';
import { WorkspaceManager } from '../workspace-manager.service';
import { NoWorkspaceQuota } from '../workspace-quota';
import { WorkspaceUsage } from '../workspace-usage';
import { CheckpointError } from '../workspace.errors';
import { resolveWorkspaceOptions } from '../workspace.options';
import type { CheckpointSpec } from './checkpoint-store';
import type { TreeDiff } from './checkpoint.types';
import { newCheckpointId } from './checkpoint-records';
import { DiskCheckpointVault } from './disk-checkpoint-vault';
import { PodCheckpointStore } from './pod-checkpoint-store';
import { TAR_HEADROOM_BYTES } from './pod-tar';
import { type DiffWork, splitLines, unifiedDiff } from './pod-unified-diff';
import type { PodWorkspaceIo } from './pod-workspace-io';
import { type DiffLimits, TreeTool } from './tree-tool';
import { WorkspaceCheckpoints } from './workspace-checkpoints.service';

// The fake pods unpack as root (owners kept), and the tree tool that the answers are checked against runs as root.
if (process.getuid?.() !== 0) throw new Error('pod checkpoint tests run as root, like the engine');

const UID = 10001;
const MiB = 2 ** 20;
const LIMITS: DiffLimits = { maxEntries: 10_000, maxTextBytes: 64 * 1024, maxDiffBytes: MiB };

/** Pods whose workspaces are directories: the system's tar out of them and into them, as the Kubernetes backend does. */
class FakePods implements PodWorkspaceIo {
  /** What `tarOut` answers instead of the workspace, by session: a sandbox's crafted tar. */
  readonly crafted = new Map<string, Buffer>();
  readonly tarIns: string[] = [];

  constructor(readonly dirOf: (sessionId: string) => string) {}

  tarOut(sessionId: string): Promise<Buffer> {
    const crafted = this.crafted.get(sessionId);
    if (crafted) return Promise.resolve(crafted);
    const out = execFileSync('tar', ['-C', this.dirOf(sessionId), '-cf', '-', '.'], {
      maxBuffer: 1024 * MiB,
    });
    return Promise.resolve(out);
  }

  tarIn(sessionId: string, tar: Buffer, options: { replace: boolean; dataOnly?: boolean }): Promise<void> {
    this.tarIns.push(sessionId);
    const dir = this.dirOf(sessionId);
    mkdirSync(dir, { recursive: true });
    if (options.replace) execFileSync('find', [dir, '-mindepth', '1', '-delete']);
    execFileSync('tar', ['-x', '-p', '-C', dir, '-f', '-'], { input: tar });
    if (options.dataOnly) {
      execFileSync('find', [
        dir,
        '-mindepth',
        '1',
        '!',
        '-type',
        'f',
        '!',
        '-type',
        'd',
        '!',
        '-type',
        'l',
        '-delete',
      ]);
    }
    return Promise.resolve();
  }
}

/** Every entry under `dir`, byte-exact names: type, mode, owner, mtime (seconds: what tar keeps), target, contents. */
function tree(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const listing = execFileSync('find', ['.', '-mindepth', '1', '-printf', '%P\\0%y %m %U:%G %Ts %l\\0'], {
    cwd: dir,
  });
  const fields = listing.toString('latin1').split('\0');
  for (let i = 0; i + 1 < fields.length; i += 2) {
    const [name, meta] = [fields[i], fields[i + 1]];
    const data = meta.startsWith('f ')
      ? readFileSync(Buffer.concat([Buffer.from(`${dir}/`), Buffer.from(name, 'latin1')])).toString('base64')
      : '';
    out[name] = `${meta} ${data}`;
  }
  return out;
}

/** A workspace as code leaves it: nested directories, modes, links in and out, a hard link, odd names. */
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
  linkSync(path.join(dir, 'run.sh'), path.join(dir, 'run-again.sh'));
  writeFileSync(path.join(dir, 'blob.bin'), Buffer.from([0, 1, 2, 3]));
  writeFileSync(path.join(dir, 'ünïcode-😀.txt'), 'x\n');
  writeFileSync(Buffer.from(`${dir}/bad-\xff\xfe.txt`, 'latin1'), 'not UTF-8 name\n');
  mkdirSync(path.join(dir, 'a'));
  writeFileSync(path.join(dir, 'a/x'), '1');
  writeFileSync(path.join(dir, 'a-b'), '2');
  writeFileSync(path.join(dir, `${'long-name-'.repeat(12)}.txt`), 'a name past 100 bytes\n');
  execFileSync('chown', ['-R', '-h', `${UID}:${UID}`, dir]);
}

/** What a failed action does: half-writes, deletes, adds, changes a mode, swaps a file for a link. */
function mess(dir: string): void {
  writeFileSync(path.join(dir, 'src/app.py'), 'print("v2"');
  rmSync(path.join(dir, 'src/pkg'), { recursive: true });
  writeFileSync(path.join(dir, 'new.txt'), 'added');
  mkdirSync(path.join(dir, 'build/out'), { recursive: true });
  chmodSync(path.join(dir, 'run.sh'), 0o600);
  rmSync(path.join(dir, 'secret/token'));
  symlinkSync('/etc/passwd', path.join(dir, 'secret/token'));
}

/** A tar as a sandbox could craft it. */
async function craft(entries: Array<Headers & { data?: string }>): Promise<Buffer> {
  const p = pack();
  const chunks: Buffer[] = [];
  p.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise((resolve) => p.on('end', resolve));
  for (const { data, ...header } of entries) {
    await new Promise<void>((resolve, reject) =>
      p.entry({ mode: 0o644, mtime: new Date(0), ...header }, data ?? '', (err) =>
        err ? reject(err) : resolve(),
      ),
    );
  }
  p.finalize();
  await done;
  return Buffer.concat(chunks);
}

describe('PodCheckpointStore (fake pods: real directories, the system tar)', () => {
  let base: string;
  let pods: FakePods;
  let store: PodCheckpointStore;
  let tool: TreeTool;
  let dirOfStore: string;
  const ws = (sessionId: string) => path.join(base, 'pods', sessionId);
  const spec = (sessionId: string, createdAt = new Date().toISOString()): CheckpointSpec => ({
    id: newCheckpointId(),
    sessionId,
    createdAt,
    auto: false,
  });
  /** A copy of a workspace as it is now, for the tree tool to compare. */
  let states = 0;
  const freeze = (sessionId: string): string => {
    const to = path.join(base, 'states', `${states++}`);
    mkdirSync(path.dirname(to), { recursive: true });
    execFileSync('cp', ['-a', ws(sessionId), to]);
    return to;
  };
  const fresh = (sessionId: string): string => {
    mkdirSync(ws(sessionId), { recursive: true });
    return ws(sessionId);
  };

  beforeAll(async () => {
    base = mkdtempSync(path.join(tmpdir(), 'pod-checkpoints-'));
    tool = new TreeTool({ binds: [base] });
    await tool.start();
  });
  afterAll(() => {
    tool.close();
    rmSync(base, { recursive: true, force: true });
  });
  beforeEach(() => {
    dirOfStore = mkdtempSync(path.join(base, 'store-'));
    pods = new FakePods(ws);
    store = new PodCheckpointStore({
      vault: new DiskCheckpointVault(dirOfStore),
      io: pods,
      maxBytes: 8 * MiB,
    });
  });

  it('takes a checkpoint counted as the tree tool counts, and restores the exact tree after changes', async () => {
    const dir = fresh('ses_a');
    populate(dir);
    const before = tree(dir);
    const checkpoint = await store.create({ ...spec('ses_a'), label: 'clean' });
    const counts = await tool.count(dir);
    expect(checkpoint).toMatchObject({ sessionId: 'ses_a', label: 'clean', ...counts });
    expect(counts).toMatchObject({ files: 13, directories: 4 });
    expect(readdirSync(path.join(dirOfStore, 'ses_a')).sort()).toEqual([
      checkpoint.id,
      `${checkpoint.id}.json`,
    ]);
    expect(JSON.parse(readFileSync(path.join(dirOfStore, 'ses_a', `${checkpoint.id}.json`), 'utf8'))).toEqual(
      checkpoint,
    );

    mess(dir);
    expect(tree(dir)).not.toEqual(before);
    const stats = await store.restore('ses_a', checkpoint.id);
    expect(tree(dir)).toEqual(before);
    // Every entry written anew (the workspace emptied first); the hard link's data unpacked once.
    expect(stats).toEqual({
      copied: counts.files + counts.directories,
      removed: 0,
      kept: 0,
      bytesCopied: counts.bytes - 10,
    });
    expect(pods.tarIns).toEqual(['ses_a']);
    // The checkpoint itself is intact: restoring again gives the same tree.
    writeFileSync(path.join(dir, 'later'), 'x');
    await store.restore('ses_a', checkpoint.id);
    expect(tree(dir)).toEqual(before);
  });

  it('lists oldest first, removes, and forgets the session', async () => {
    fresh('ses_l');
    const later = await store.create(spec('ses_l', '2030-01-01T00:00:02.000Z'));
    const earlier = await store.create(spec('ses_l', '2030-01-01T00:00:01.000Z'));
    const sameTime = [spec('ses_l', '2030-01-01T00:00:03.000Z'), spec('ses_l', '2030-01-01T00:00:03.000Z')];
    for (const s of sameTime) await store.create(s);
    const ids = sameTime.map((s) => s.id).sort();
    expect((await store.list('ses_l')).map((c) => c.id)).toEqual([earlier.id, later.id, ...ids]);
    await store.remove('ses_l', later.id);
    expect((await store.list('ses_l')).map((c) => c.id)).toEqual([earlier.id, ...ids]);
    expect(existsSync(path.join(dirOfStore, 'ses_l', later.id))).toBe(false);
    expect(await store.list('ses_none')).toEqual([]);
    await store.forget('ses_l');
    expect(existsSync(path.join(dirOfStore, 'ses_l'))).toBe(false);
    expect(await store.list('ses_l')).toEqual([]);
  });

  it('never lists a half-made checkpoint (a tar without its record), and sweeps it', async () => {
    fresh('ses_c');
    const whole = await store.create(spec('ses_c'));
    const dir = path.join(dirOfStore, 'ses_c');
    const orphan = newCheckpointId();
    writeFileSync(path.join(dir, orphan), readFileSync(path.join(dir, whole.id))); // crash before its record
    writeFileSync(path.join(dir, `${newCheckpointId()}~partial~0000`), 'cut'); // crash while writing the tar
    writeFileSync(path.join(dir, `${newCheckpointId()}.json`), JSON.stringify({ ...whole })); // a record alone
    writeFileSync(path.join(dir, `.${whole.id}.json~torn`), '{"id":');
    expect((await store.list('ses_c')).map((c) => c.id)).toEqual([whole.id]);
    expect(readdirSync(dir).sort()).toEqual([whole.id, `${whole.id}.json`].sort());
  });

  it('diffs two checkpoints and a checkpoint against the workspace now, as the tree tool diffs the trees', async () => {
    const dir = fresh('ses_d');
    populate(dir);
    writeFileSync(path.join(dir, 'notes.md'), 'one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\nnine\nten\n');
    writeFileSync(path.join(dir, 'big.txt'), 'b'.repeat(2000));
    writeFileSync(path.join(dir, 'latin1.txt'), Buffer.from('caf\xe9\n', 'latin1'));
    const first = await store.create(spec('ses_d'));
    const firstTree = freeze('ses_d');

    writeFileSync(path.join(dir, 'src/app.py'), 'print("v1")\nprint("v2")\n');
    writeFileSync(
      path.join(dir, 'notes.md'),
      'one\ntwo\n3\nfour\nfive\nsix\nseven\neight\nnine\nten\neleven',
    );
    writeFileSync(path.join(dir, 'big.txt'), 'c'.repeat(2000));
    writeFileSync(path.join(dir, 'blob.bin'), Buffer.from([0, 1, 2, 4]));
    writeFileSync(path.join(dir, 'latin1.txt'), Buffer.from('caf\xe8\n', 'latin1'));
    chmodSync(path.join(dir, 'secret/token'), 0o600); // a mode alone
    chmodSync(path.join(dir, 'secret'), 0o755); // a directory's mode: not a difference
    rmSync(path.join(dir, 'up'));
    symlinkSync('../etc/passwd', path.join(dir, 'up'));
    rmSync(path.join(dir, 'src/pkg'), { recursive: true });
    rmSync(path.join(dir, 'a-b'));
    mkdirSync(path.join(dir, 'a-b/c'), { recursive: true }); // a file become a directory
    writeFileSync(path.join(dir, 'a-b/c/d'), 'deep');
    writeFileSync(path.join(dir, 'run.sh'), '#!/bin/sh\necho hi\n'); // and its hard link with it
    execFileSync('mkfifo', [path.join(dir, 'fifo')]); // not data: not a difference
    const now = freeze('ses_d');

    const current = await store.diff('ses_d', first.id, 'current', LIMITS);
    expect(current.added).toEqual([
      { path: 'a-b', type: 'dir' },
      { path: 'a-b/c', type: 'dir' },
      { path: 'a-b/c/d', type: 'file', size: 4 },
    ]);
    expect(current.removed).toEqual([
      { path: 'a-b', type: 'file', size: 1 },
      { path: 'src/pkg', type: 'dir' },
      { path: 'src/pkg/__init__.py', type: 'file', size: 0 },
    ]);
    expect(current.modified.map((m) => m.path)).toEqual([
      'big.txt',
      'blob.bin',
      'latin1.txt',
      'notes.md',
      'run-again.sh',
      'run.sh',
      'secret/token',
      'src/app.py',
      'up',
    ]);
    const byPath = Object.fromEntries(current.modified.map((m) => [m.path, m]));
    expect(byPath['src/app.py']).toEqual({
      path: 'src/app.py',
      type: 'file',
      sizeBefore: 12,
      sizeAfter: 24,
      diff: '--- a/src/app.py\n+++ b/src/app.py\n@@ -1 +1,2 @@\n print("v1")\n+print("v2")\n',
    });
    expect(byPath['notes.md'].diff).toBe(
      '--- a/notes.md\n+++ b/notes.md\n@@ -1,6 +1,6 @@\n one\n two\n-three\n+3\n four\n five\n six\n' +
        '@@ -8,3 +8,4 @@\n eight\n nine\n ten\n+eleven',
    );
    expect(byPath['big.txt'].diff).toBe(
      `--- a/big.txt\n+++ b/big.txt\n@@ -1 +1 @@\n-${'b'.repeat(2000)}+${'c'.repeat(2000)}`,
    );
    expect(byPath['blob.bin']).toMatchObject({ diffOmitted: 'binary' });
    expect(byPath['latin1.txt']).toMatchObject({ diffOmitted: 'binary' });
    expect(byPath['secret/token']).toEqual({
      path: 'secret/token',
      type: 'file',
      sizeBefore: 1,
      sizeAfter: 1,
      modeBefore: '0644',
      modeAfter: '0600',
      contentUnchanged: true,
    });
    expect(byPath.up).toEqual({
      path: 'up',
      type: 'symlink',
      targetBefore: '../etc/hosts',
      targetAfter: '../etc/passwd',
    });
    expect(current.truncated).toBe(false);
    expect(current).toEqual(await tool.diff(firstTree, now, 'content', LIMITS));

    // Between two checkpoints: the same answer.
    const second = await store.create(spec('ses_d'));
    expect(await store.diff('ses_d', first.id, second.id, LIMITS)).toEqual(current);
    expect(await store.diff('ses_d', second.id, 'current', LIMITS)).toEqual({
      added: [],
      removed: [],
      modified: [],
      truncated: false,
    });
    // And the other way round.
    expect(await store.diff('ses_d', second.id, first.id, LIMITS)).toEqual(
      await tool.diff(now, firstTree, 'content', LIMITS),
    );
  });

  it('caps a diff as the tree tool does: entries, text size, the answer’s diff budget', async () => {
    const dir = fresh('ses_cap');
    for (const name of ['a.txt', 'b.txt', 'c.txt', 'd.txt'])
      writeFileSync(path.join(dir, name), `${name} v1\n`);
    writeFileSync(path.join(dir, 'large.txt'), 'x\n'.repeat(100));
    const first = await store.create(spec('ses_cap'));
    const before = freeze('ses_cap');
    for (const name of ['a.txt', 'b.txt', 'c.txt', 'd.txt'])
      writeFileSync(path.join(dir, name), `${name} v2\n`);
    writeFileSync(path.join(dir, 'large.txt'), 'y\n'.repeat(100));
    for (const name of ['e', 'f', 'g']) writeFileSync(path.join(dir, name), name);
    const after = freeze('ses_cap');
    const cases: DiffLimits[] = [
      { maxEntries: 3, maxTextBytes: 1024, maxDiffBytes: MiB },
      { maxEntries: 8, maxTextBytes: 1024, maxDiffBytes: MiB }, // full exactly at the end: not truncated
      { maxEntries: 7, maxTextBytes: 1024, maxDiffBytes: MiB }, // full one short of the end: truncated
      { maxEntries: 100, maxTextBytes: 100, maxDiffBytes: MiB },
      { maxEntries: 100, maxTextBytes: 1024, maxDiffBytes: 100 },
      { maxEntries: 0, maxTextBytes: 0, maxDiffBytes: 0 },
    ];
    const answers: TreeDiff[] = [];
    for (const limits of cases) {
      const answer = await store.diff('ses_cap', first.id, 'current', limits);
      expect(answer).toEqual(await tool.diff(before, after, 'content', limits));
      answers.push(answer);
    }
    expect(answers[0]).toMatchObject({ truncated: true, added: [], removed: [] });
    expect(answers[0].modified.map((m) => m.path)).toEqual(['a.txt', 'b.txt', 'c.txt']);
    expect(answers[1].truncated).toBe(false);
    expect(answers[2].truncated).toBe(true);
    expect(answers[3].modified.find((m) => m.path === 'large.txt')).toMatchObject({
      diffOmitted: 'too_large',
    });
    // a.txt's diff takes 57 of the 100 bytes: b.txt's would take as many.
    expect(answers[4].modified.map((m) => m.diffOmitted ?? 'diff')).toEqual([
      'diff',
      'budget',
      'budget',
      'budget',
      'budget',
    ]);
    expect(answers[5]).toEqual({ added: [], removed: [], modified: [], truncated: true });
  });

  it('forks into another session, at a checkpoint or as the workspace is now', async () => {
    const dir = fresh('ses_f');
    populate(dir);
    const at = await store.create(spec('ses_f'));
    const atCheckpoint = tree(dir);
    writeFileSync(path.join(dir, 'later.txt'), 'after the checkpoint');
    const now = tree(dir);
    const made: string[] = [];
    await store.fork('ses_f', undefined, 'ses_g', () => Promise.resolve(void made.push(fresh('ses_g'))));
    // A workspace the new session's creation left something in: the fork replaces it.
    await store.fork('ses_f', at.id, 'ses_h', () => {
      made.push(fresh('ses_h'));
      writeFileSync(path.join(ws('ses_h'), 'stale'), 'x');
      return Promise.resolve();
    });
    expect(made).toEqual([ws('ses_g'), ws('ses_h')]);
    expect(tree(ws('ses_g'))).toEqual(now);
    expect(tree(ws('ses_h'))).toEqual(atCheckpoint);
    expect(await store.list('ses_g')).toEqual([]);
    writeFileSync(path.join(ws('ses_g'), 'src/app.py'), 'fork');
    expect(readFileSync(path.join(dir, 'src/app.py'), 'utf8')).toBe('print("v1")\n');
    expect((await store.create(spec('ses_g'))).sessionId).toBe('ses_g');
    expect((await store.list('ses_f')).map((c) => c.id)).toEqual([at.id]);
  });

  it('refuses a workspace past the cap, and checkpoints that would hold more than the cap together', async () => {
    const dir = fresh('ses_big');
    store = new PodCheckpointStore({
      vault: new DiskCheckpointVault(dirOfStore),
      io: pods,
      maxBytes: 64 * 1024,
    });
    writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(64 * 1024 + 1, 7));
    await expect(store.create(spec('ses_big'))).rejects.toMatchObject({
      code: 'CHECKPOINT_SPACE',
      kind: 'payload_too_large',
    });
    writeFileSync(path.join(dir, 'big.bin'), Buffer.alloc(40 * 1024, 7));
    const first = await store.create(spec('ses_big'));
    await expect(store.create(spec('ses_big'))).rejects.toMatchObject({
      code: 'CHECKPOINT_SPACE',
      details: { bytes: 40 * 1024, held: 40 * 1024, limit: 64 * 1024 },
    });
    expect(readdirSync(path.join(dirOfStore, 'ses_big')).sort()).toEqual([first.id, `${first.id}.json`]);
    // A tar larger than the cap and its headers is refused before it is read; so is a diff against it, or a fork.
    pods.crafted.set('ses_big', Buffer.alloc(64 * 1024 + TAR_HEADROOM_BYTES + 1));
    await expect(store.create(spec('ses_big'))).rejects.toMatchObject({ code: 'CHECKPOINT_SPACE' });
    await expect(store.diff('ses_big', first.id, 'current', LIMITS)).rejects.toMatchObject({
      code: 'CHECKPOINT_SPACE',
    });
    await expect(store.fork('ses_big', undefined, 'ses_big2', () => Promise.resolve())).rejects.toMatchObject(
      {
        code: 'CHECKPOINT_SPACE',
      },
    );
    expect(pods.tarIns).toEqual([]);
  });

  it('refuses a crafted tar that reaches out of the workspace, writing nothing anywhere', async () => {
    fresh('ses_x');
    const outside = path.join(base, 'outside');
    mkdirSync(path.join(outside, 'inner'), { recursive: true });
    const evil: Array<Array<Headers & { data?: string }>> = [
      [{ name: '../evil', data: 'x' }],
      [{ name: 'ok/../../evil', data: 'x' }],
      [{ name: `${outside}/evil`, data: 'x' }],
      [
        { name: 'link', type: 'symlink', linkname: outside },
        { name: 'link/evil', data: 'x' },
      ],
      [
        { name: 'file', data: 'x' },
        { name: 'file/evil', data: 'x' },
      ],
      [{ name: 'hard', type: 'link', linkname: '/etc/passwd' }],
      [{ name: 'hard', type: 'link', linkname: 'missing' }],
      [
        { name: 'twice', data: 'x' },
        { name: './twice', data: 'y' },
      ],
      [{ name: '', data: 'x' }],
    ];
    const first = await store.create(spec('ses_x'));
    for (const entries of evil) {
      pods.crafted.set('ses_x', await craft(entries));
      await expect(store.create(spec('ses_x'))).rejects.toMatchObject({ code: 'CHECKPOINT_FAILED' });
      await expect(store.diff('ses_x', first.id, 'current', LIMITS)).rejects.toBeInstanceOf(CheckpointError);
      await expect(store.fork('ses_x', undefined, 'ses_y', () => Promise.resolve())).rejects.toBeInstanceOf(
        CheckpointError,
      );
    }
    // Not a tar at all.
    pods.crafted.set('ses_x', Buffer.from('definitely not a tar archive'.repeat(40)));
    await expect(store.create(spec('ses_x'))).rejects.toMatchObject({ code: 'CHECKPOINT_FAILED' });
    const truncated = await craft([{ name: 'f', data: 'x'.repeat(2000) }]);
    pods.crafted.set('ses_x', truncated.subarray(0, 1024));
    await expect(store.create(spec('ses_x'))).rejects.toMatchObject({ code: 'CHECKPOINT_FAILED' });

    expect(readdirSync(outside)).toEqual(['inner']);
    expect(existsSync(path.join(base, 'evil'))).toBe(false);
    expect(readdirSync(path.join(dirOfStore, 'ses_x')).sort()).toEqual([first.id, `${first.id}.json`]);
    expect(pods.tarIns).toEqual([]);
  });

  it('ignores devices and fifos: not counted, not compared, nothing made on the engine', async () => {
    fresh('ses_dev');
    pods.crafted.set(
      'ses_dev',
      await craft([
        { name: './', type: 'directory', mode: 0o755 },
        { name: './dev', type: 'directory', mode: 0o755 },
        { name: './dev/null', type: 'character-device', devmajor: 1, devminor: 3 },
        { name: './dev/sda', type: 'block-device', devmajor: 8, devminor: 0 },
        { name: './pipe', type: 'fifo' },
        { name: './file.txt', data: 'data\n' },
      ]),
    );
    const checkpoint = await store.create(spec('ses_dev'));
    expect(checkpoint).toMatchObject({ files: 1, directories: 1, bytes: 5 });
    pods.crafted.set(
      'ses_dev',
      await craft([
        { name: 'file.txt', data: 'data\n' },
        { name: 'pipe', type: 'fifo' },
      ]),
    );
    expect(await store.diff('ses_dev', checkpoint.id, 'current', LIMITS)).toEqual({
      added: [],
      removed: [{ path: 'dev', type: 'dir' }],
      modified: [],
      truncated: false,
    });
    expect(readdirSync(path.join(dirOfStore, 'ses_dev')).sort()).toEqual([
      checkpoint.id,
      `${checkpoint.id}.json`,
    ]);
  });

  it('reads pax tars (long and non-ASCII names, sub-second times) as it reads GNU ones', async () => {
    const dir = fresh('ses_pax');
    populate(dir);
    // Not a UTF-8 name: GNU tar writes its bytes as they are in a pax record, which tar-stream reads as UTF-8.
    rmSync(Buffer.from(`${dir}/bad-\xff\xfe.txt`, 'latin1'));
    const gnu = await store.create(spec('ses_pax'));
    pods.crafted.set(
      'ses_pax',
      execFileSync('tar', ['--format=posix', '-C', dir, '-cf', '-', '.'], { maxBuffer: 64 * MiB }),
    );
    const pax = await store.create(spec('ses_pax'));
    expect(pax).toMatchObject({ files: gnu.files, directories: gnu.directories, bytes: gnu.bytes });
    expect(await store.diff('ses_pax', gnu.id, pax.id, LIMITS)).toEqual({
      added: [],
      removed: [],
      modified: [],
      truncated: false,
    });
    pods.crafted.delete('ses_pax');
    const before = tree(dir);
    mess(dir);
    await store.restore('ses_pax', pax.id);
    expect(tree(dir)).toEqual(before);
  });
});

describe('unifiedDiff (difflib.unified_diff as the tree tool calls it)', () => {
  /** What Python answers for the same texts. */
  const python = (pairs: Array<[string, string]>): string[] =>
    JSON.parse(
      execFileSync(
        '/usr/bin/python3',
        [
          '-c',
          'import difflib, json, sys\n' +
            'print(json.dumps([' +
            "''.join(difflib.unified_diff(a.splitlines(True), b.splitlines(True), 'a/f', 'b/f'))" +
            ' for a, b in json.load(sys.stdin)]))',
        ],
        { input: JSON.stringify(pairs) },
      ).toString(),
    ) as string[];
  const lines = (n: number, f: (i: number) => string = (i) => `line ${i}`) =>
    Array.from({ length: n }, (_, i) => `${f(i)}\n`).join('');
  const work = (): DiffWork => ({ comparisons: 1_000_000 });

  it('answers what Python answers', () => {
    const base = lines(40);
    const pairs: Array<[string, string]> = [
      ['a\nb', 'a\nc'], // no newline at the end
      ['', 'new\n'],
      ['old\n', ''],
      ['a\r\nb\r\nc\r\n', 'a\r\nB\r\nc\r\n'],
      ['a\rb\rc', 'a\rx\rc'],
      ['a\x0cb\x0bc\x1cd\u2028e\x85f\n', 'a\x0cB\x0bc\x1cd\u2028E\x85f\n'],
      ['é😀\n', 'è😀\n'],
      [base, base.replace('line 3\n', 'three\n').replace('line 30\n', 'thirty\n')], // two hunks
      [base, base.replace('line 3\n', 'three\n').replace('line 10\n', 'ten\n')], // 6 apart: one hunk
      [base, base.replace('line 3\n', 'three\n').replace('line 11\n', 'eleven\n')], // 7 apart: two
      [base, `head\n${base}tail\n`],
      [base, base.replace('line 20\n', '')],
      [base, base.replace(/line 1\d\n/g, '')],
      [lines(10), lines(10, (i) => `other ${i}`)],
      [
        lines(300, (i) => `${i % 2 ? '' : `code ${i}`}`),
        lines(300, (i) => `${i % 2 ? '' : `code ${i}`}`).replace('code 150', 'changed'),
      ],
    ];
    expect(pairs.map(([a, b]) => unifiedDiff(a, b, 'f', work()))).toEqual(python(pairs));
  });

  it('splits lines as Python does', () => {
    expect(splitLines('a\x0bb\x1cc\r\nd\re\x85f\u2028g')).toEqual([
      'a\x0b',
      'b\x1c',
      'c\r\n',
      'd\r',
      'e\x85',
      'f\u2028',
      'g',
    ]);
    expect(splitLines('')).toEqual([]);
    expect(splitLines('\n\n')).toEqual(['\n', '\n']);
  });

  it('past its bound, makes the lines between the common head and tail one change', () => {
    const a = lines(20);
    const b = a.replace('line 5\n', 'five\n').replace('line 14\n', 'fourteen\n');
    const spent: DiffWork = { comparisons: 0 };
    const diff = unifiedDiff(a, b, 'f', spent);
    expect(diff).toBe(
      '--- a/f\n+++ b/f\n@@ -3,16 +3,16 @@\n line 2\n line 3\n line 4\n' +
        a
          .split('\n')
          .slice(5, 15)
          .map((l) => `-${l}\n`)
          .join('') +
        b
          .split('\n')
          .slice(5, 15)
          .map((l) => `+${l}\n`)
          .join('') +
        ' line 15\n line 16\n line 17\n',
    );
    const left = work();
    unifiedDiff(a, b, 'f', left);
    expect(left.comparisons).toBeLessThan(1_000_000);
  });
});

describe('WorkspaceCheckpoints with pods (POD_WORKSPACE_IO given)', () => {
  let base: string;

  beforeEach(() => {
    base = mkdtempSync(path.join(tmpdir(), 'pod-service-'));
  });
  afterEach(() => rmSync(base, { recursive: true, force: true }));

  it('keeps every session’s checkpoints as tars beside the copies, through the same service', async () => {
    const options = resolveWorkspaceOptions({
      root: path.join(base, 'workspaces'),
      sandboxUid: UID,
      sandboxGid: UID,
      limits: { maxWorkspaceBytes: 64 * MiB },
      imagePool: 0,
    });
    const workspaces = new WorkspaceManager(options, new WorkspaceUsage(), new NoWorkspaceQuota());
    const pods = new FakePods((id) => workspaces.dirOf(id));
    const checkpoints = new WorkspaceCheckpoints(
      options,
      workspaces,
      new NoWorkspaceQuota(),
      undefined,
      pods,
    );
    await checkpoints.onModuleInit();
    try {
      const dir = await workspaces.create('ses_p');
      populate(dir);
      const before = tree(dir);
      expect(await checkpoints.kindOf('ses_p')).toBe('copy');
      const { checkpoint } = await checkpoints.create('ses_p', { label: 'pod' });
      const kept = path.join(options.imageDir, '.checkpoints', 'ses_p');
      expect(readdirSync(kept).sort()).toEqual([checkpoint.id, `${checkpoint.id}.json`]);
      expect(execFileSync('tar', ['-tf', path.join(kept, checkpoint.id)]).toString()).toContain(
        './src/app.py',
      );
      mess(dir);
      const { stats } = await checkpoints.restore('ses_p', checkpoint.id);
      expect(tree(dir)).toEqual(before);
      expect(stats.copied).toBe(checkpoint.files + checkpoint.directories);
      writeFileSync(path.join(dir, 'new.txt'), 'added');
      chownSync(path.join(dir, 'new.txt'), UID, UID);
      expect((await checkpoints.diff('ses_p', checkpoint.id, 'current')).added).toEqual([
        { path: 'new.txt', type: 'file', size: 5 },
      ]);
      await checkpoints.fork('ses_p', checkpoint.id, 'ses_q');
      expect(tree(workspaces.dirOf('ses_q'))).toEqual(before);
      await checkpoints.forget('ses_p');
      expect(existsSync(kept)).toBe(false);
      expect(await checkpoints.list('ses_p')).toEqual([]);
    } finally {
      await checkpoints.onApplicationShutdown();
      await workspaces.onApplicationShutdown();
    }
  });
});
