/**
 * The snapshot a Kubernetes session pod's runner takes around every code action (docker/sandbox/runner/
 * runner_snapshot.py, which the runner answers `snapshot` with), run as a command (the request on stdin, one JSON line
 * out: the same walk and the same answer) with the host's python3 and with the sandbox image's own copy. Its values
 * are its own ("size:mtime_ns:ino"), so what is compared with `WorkspaceManager.snapshot` on an identical tree is what
 * the engine reads from it: the paths, their order, `partial`, and what `changedPaths` makes of two of them. The
 * runner's side of it (the op, its slices, its refusals) is test/python/runner/test_runner_snapshot.py's.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import { WorkspaceManager } from '../workspace-manager.service';
import { resolveWorkspaceOptions } from '../workspace.options';
import {
  changedPaths,
  parseAnswer,
  type WireSnapshot,
  type WorkspaceToolAnswer,
} from './workspace-tool.protocol';
import { seed } from './workspace-tool.table.testing';
import { dockerHas, sandboxImage } from './workspace-tool.testing';

const SCRIPT = path.resolve(
  __dirname,
  '..',
  '..',
  '..',
  '..',
  'docker',
  'sandbox',
  'runner',
  'runner_snapshot.py',
);

function runScript(input: string): WorkspaceToolAnswer<'snapshot'> {
  const r = spawnSync('python3', [SCRIPT], { input, encoding: 'utf8', timeout: 30_000 });
  expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
  expect(r.stdout.indexOf('\n')).toBe(r.stdout.length - 1); // one line
  return parseAnswer<'snapshot'>(r.stdout);
}

function snapshotOf(request: Record<string, unknown>): WireSnapshot {
  const answer = runScript(JSON.stringify(request));
  if (!answer.ok) throw new Error(`snapshot refused: ${JSON.stringify(answer.error)}`);
  return answer.snapshot;
}

describe('runner_snapshot.py (the pod snapshot)', () => {
  let tmp: string;

  beforeAll(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-podsnap-')));
  });
  afterAll(() => fs.rm(tmp, { recursive: true, force: true }));

  it('walks the paths WorkspaceManager.snapshot walks, in its order, and changedPaths reads the same changes', async () => {
    const ws = await seed(tmp, 'snap');
    // Names whose UTF-16 order differs from their UTF-8 (and code point) order, and a name that is not UTF-8.
    await fs.writeFile(path.join(ws, '\u{1F600}.txt'), 'astral');
    await fs.writeFile(path.join(ws, '\uFF5E.txt'), 'fullwidth tilde');
    await fs.writeFile(Buffer.from(path.join(ws, 'raw-\xff.bin'), 'latin1'), 'x');
    const manager = new WorkspaceManager(resolveWorkspaceOptions({ root: path.dirname(ws) }));
    const small = new WorkspaceManager(
      resolveWorkspaceOptions({ root: path.dirname(ws), snapshotMaxEntries: 3 }),
    );
    const keys = (s: { entries: Map<string, string> | [string, string][] }) => [...s.entries].map(([k]) => k);

    const before = snapshotOf({ root: ws });
    const host = await manager.snapshot('ws');
    expect(keys(before)).toEqual(keys(host));
    expect(before.partial).toBe(false);
    expect(keys(before)).toEqual(expect.arrayContaining(['sub/deeper/d.py', 'esc', 'hard', 'inlink']));
    // JavaScript's order: U+FF5E sorts after U+1F600 (a surrogate pair starting 0xD83D), unlike in code points.
    expect(keys(before).indexOf('\uFF5E.txt')).toBeGreaterThan(keys(before).indexOf('\u{1F600}.txt'));
    // Values: size, mtime in ns, inode, as lstat gives them (a link's own, not its target's).
    const stat = await fs.lstat(path.join(ws, 'esc'), { bigint: true });
    expect(new Map(before.entries).get('esc')).toBe(`${stat.size}:${stat.mtimeNs}:${stat.ino}`);

    const smallBefore = snapshotOf({ root: ws, maxEntries: 3 });
    expect(keys(smallBefore)).toEqual(keys(await small.snapshot('ws')));
    expect(smallBefore.partial).toBe(true);
    const scanBound = snapshotOf({ root: ws, maxScanEntries: 4 });
    expect(scanBound.partial).toBe(true);
    expect(scanBound.entries.length).toBeLessThanOrEqual(4);

    // What a code action does behind the file API's back; a rewrite of the same size shows through its mtime.
    const code =
      'echo changed >> a.txt && rm big.txt && mkdir -p out && echo new > out/n.txt && touch src/main.py && ' +
      'sleep 0.01 && printf "print(\\"HELLO\\")\\n" > sub/deeper/d.py';
    execFileSync('sh', ['-c', code], { cwd: ws });
    const after = snapshotOf({ root: ws });
    const changed = ['a.txt', 'big.txt', 'out/n.txt', 'src/main.py', 'sub/deeper/d.py'];
    expect(changedPaths(before, after)).toEqual(changed);
    expect(manager.changedPaths(host, await manager.snapshot('ws'))).toEqual(changed);
    // Partial snapshots compare only what both cover: the first three entries (a.txt, big.txt, bin.dat).
    expect(changedPaths(smallBefore, after)).toEqual(['a.txt', 'big.txt']);
    expect(changedPaths(after, after)).toEqual([]);
  });

  it('never follows a link: a linked directory is one entry, its contents unseen', async () => {
    const ws = await seed(tmp, 'links');
    await fs.symlink(path.join(tmp, 'links', 'outside'), path.join(ws, 'outdir'));
    const snap = snapshotOf({ root: ws });
    expect(keys(snap)).toContain('outdir');
    expect(keys(snap).filter((k) => k.startsWith('outdir/'))).toEqual([]);
    expect(keys(snap).some((k) => k.includes('secret'))).toBe(false);
    function keys(s: WireSnapshot) {
      return s.entries.map(([k]) => k);
    }
  });

  it('refuses a bad request and a missing workspace with the tool’s errors', async () => {
    for (const input of [
      '[1]',
      '{"maxEntries":0}',
      '{"maxScanEntries":"9"}',
      '{"maxEntries":true}',
      'nope',
    ]) {
      const answer = runScript(input);
      expect(answer).toMatchObject({ ok: false, error: { code: 'BAD_REQUEST' } });
    }
    const missing = runScript(JSON.stringify({ root: path.join(tmp, 'missing') }));
    expect(missing).toMatchObject({ ok: false, error: { name: 'NotFoundError', code: 'NOT_FOUND' } });
  });

  it('runs on the sandbox image’s python3 as the sandbox user, and sees what code changed there', () => {
    const image = sandboxImage();
    if (!image || !dockerHas(image)) {
      throw new Error(
        'no Docker engine or no sandbox image: run `npm run docker:engine` and `npm run sandbox:image`',
      );
    }
    const script = [
      'set -e',
      'cd /workspace && mkdir -p src && echo one > a.txt && echo two > src/b.py',
      'echo \'{"root":"/workspace"}\' | python3 /opt/switchyard/runner/runner_snapshot.py',
      'echo more >> a.txt && rm src/b.py && echo new > c.txt',
      'echo \'{"root":"/workspace"}\' | python3 /opt/switchyard/runner/runner_snapshot.py',
    ].join('\n');
    const r = spawnSync(
      'docker',
      [
        'run',
        '--rm',
        '--read-only',
        '--user',
        '10001:10001',
        '--network',
        'none',
        '--tmpfs',
        '/workspace:uid=10001,gid=10001,mode=0700',
        image,
        'sh',
        '-c',
        script,
      ],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    const [before, after] = r.stdout
      .split('\n')
      .filter(Boolean)
      .map((line) => {
        const answer = parseAnswer<'snapshot'>(line);
        if (!answer.ok) throw new Error(line);
        return answer.snapshot;
      });
    expect(before.entries.map(([k]) => k)).toEqual(['a.txt', 'src/b.py']);
    expect(changedPaths(before, after)).toEqual(['a.txt', 'c.txt', 'src/b.py']);
  });
});
