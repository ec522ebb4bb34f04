/**
 * The pod's workspace tool inside the real sandbox image, as a session pod runs it: the image's own `node`
 * (Debian's, older than the engine's), uid 10001, read-only root, `/workspace` a tmpfs owned by the sandbox user,
 * no network, the code copied to a small tmpfs first (the runner writes it to `/run/switchyard`). Needs Docker and
 * the image (`npm run docker:engine`, `npm run sandbox:image`), like the container tiers' integration specs: their
 * absence is a failure, not a skip.
 */
import { execFileSync, spawnSync } from 'node:child_process';
import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { FileOp, WorkspaceLimits } from '../file-op.types';
import { FileOperations } from '../file-operations.service';
import { resolveWorkspaceOptions } from '../workspace.options';
import {
  changedPaths,
  parseAnswer,
  reviveError,
  type WireSnapshot,
  type WorkspaceToolAnswer,
  type WorkspaceToolRequest,
} from './workspace-tool.protocol';
import {
  fromAnswer,
  LIMITS as TABLE_LIMITS,
  opOf,
  type Result,
  ROWS,
  seed,
  settle,
  treeOf,
} from './workspace-tool.table.testing';
import { type BuiltTool, buildTool, dockerHas, sandboxImage } from './workspace-tool.testing';

const IMAGE = sandboxImage();
if (!IMAGE || !dockerHas(IMAGE)) {
  throw new Error(
    `no Docker engine or no sandbox image (${IMAGE ?? 'no tag file'}): run \`npm run docker:engine\` and \`npm run sandbox:image\``,
  );
}
const image: string = IMAGE;

const LIMITS: WorkspaceLimits = {
  maxFileBytes: 64 * 1024,
  maxWorkspaceBytes: 1024 * 1024,
  maxPathLength: 4096,
};
const UID = 10001;
/** The pod's hardening, as far as `docker run` expresses it. */
const POD_FLAGS = [
  '--rm',
  '--read-only',
  '--user',
  `${UID}:${UID}`,
  '--tmpfs',
  '/tmp',
  '--tmpfs',
  `/workspace:uid=${UID},gid=${UID},mode=0700`,
  '--network',
  'none',
];

type Step = { tool: WorkspaceToolRequest } | { sh: string };

describe('pod workspace tool (sandbox image)', () => {
  let tmp: string;
  let tool: BuiltTool;

  beforeAll(async () => {
    tmp = await fs.realpath(await fs.mkdtemp(path.join(os.tmpdir(), 'sy-podtool-img-')));
    tool = buildTool(path.join(tmp, 'bundle'));
    // The sandbox user reads the bind mounts.
    await fs.chmod(tmp, 0o755);
    await fs.chmod(path.dirname(tool.file), 0o755);
    await fs.chmod(tool.file, 0o644);
  });
  afterAll(() => fs.rm(tmp, { recursive: true, force: true }));

  /**
   * One container (one workspace) for a sequence of steps: tool runs (a fresh `node` each, request on stdin) and
   * shell commands standing in for code the agent runs. Answers the tool's answers, in order.
   */
  async function session(
    name: string,
    steps: Step[],
    dockerArgs: string[] = [],
  ): Promise<WorkspaceToolAnswer[]> {
    const dir = path.join(tmp, name);
    await fs.mkdir(dir, { mode: 0o755 });
    const lines = ['set -e', 'cp /opt/tool/workspace-tool.js /run/switchyard/workspace-tool.js'];
    for (const [i, step] of steps.entries()) {
      if ('tool' in step) {
        await fs.writeFile(path.join(dir, `${i}.json`), JSON.stringify(step.tool), { mode: 0o644 });
        lines.push(`node /run/switchyard/workspace-tool.js < /opt/req/${i}.json`);
      } else {
        lines.push(`(cd /workspace && ${step.sh}) >/dev/null`);
      }
    }
    await fs.writeFile(path.join(dir, 'run.sh'), `${lines.join('\n')}\n`, { mode: 0o644 });
    const r = spawnSync(
      'docker',
      [
        'run',
        ...POD_FLAGS,
        '--tmpfs',
        `/run/switchyard:size=8m,uid=${UID},gid=${UID},mode=0700`,
        '-v',
        `${path.dirname(tool.file)}:/opt/tool:ro`,
        '-v',
        `${dir}:/opt/req:ro`,
        ...dockerArgs,
        image,
        'sh',
        '/opt/req/run.sh',
      ],
      { encoding: 'utf8', timeout: 170_000 },
    );
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    const answers = r.stdout.split('\n').filter(Boolean);
    expect(answers).toHaveLength(steps.filter((s) => 'tool' in s).length);
    return answers.map((line) => parseAnswer(line));
  }

  const file = (request: FileOp): Step => ({
    tool: { op: 'file', request, limits: LIMITS },
  });
  const ok = (a: WorkspaceToolAnswer) => {
    if (!a.ok) throw reviveError(a);
    return a as Record<string, unknown> & { ok: true };
  };
  const outputOf = (a: WorkspaceToolAnswer) => (ok(a).outcome as { output: unknown }).output;

  it('runs on the image’s node, as the sandbox user, as docker run -i gives it a request', () => {
    const version = spawnSync('docker', ['run', '--rm', '--entrypoint', 'node', image, '--version'], {
      encoding: 'utf8',
    });
    const major = Number(/^v(\d+)\./.exec(version.stdout)?.[1]);
    // The bundle targets node18 (POD_NODE_TARGET in scripts/build-pod-tools.mjs).
    expect(major).toBeGreaterThanOrEqual(18);

    // Exactly the engine's shape of call: the request on stdin, the answer on stdout.
    const request: WorkspaceToolRequest = {
      op: 'file',
      request: { op: 'write', path: 'hello.txt', content: 'hi from the pod\n' },
      limits: LIMITS,
    };
    const r = spawnSync(
      'docker',
      [
        'run',
        '-i',
        ...POD_FLAGS,
        '-v',
        `${path.dirname(tool.file)}:/opt/tool:ro`,
        image,
        'node',
        '/opt/tool/workspace-tool.js',
      ],
      { input: JSON.stringify(request), encoding: 'utf8', timeout: 60_000 },
    );
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: '' });
    expect(parseAnswer(r.stdout)).toEqual({
      ok: true,
      outcome: {
        output: { path: 'hello.txt', bytesWritten: 16, size: 16, created: true },
        touched: [{ path: 'hello.txt', access: 'write' }],
      },
    });
  });

  it('serves the file API, refusals included, and snapshots around what code changes', async () => {
    const png = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a, 0x00, 0xff, 0xfe]);
    const [
      write,
      read,
      readBin,
      readEscape,
      writeEscape,
      readHard,
      grep,
      redos,
      invisible,
      before,
      after,
      usage,
      readBytes,
      writeBytes,
      stat,
    ] = await session('api', [
      // Docker leaves the tmpfs at 0755 whatever its mode option says (the image's WORKDIR); files made by the file
      // API take the root's bits, checked at the end.
      { sh: 'chmod 700 /workspace' },
      file({ op: 'write', path: 'src/app.py', content: 'def hello():\n    return "hello"\n' }),
      file({ op: 'read', path: 'src/app.py' }),
      { tool: { op: 'writeBytes', path: 'shots/s.png', base64: png.toString('base64') } },
      { sh: 'ln -s /etc/passwd esc' },
      file({ op: 'read', path: 'esc' }),
      file({ op: 'write', path: 'esc', content: 'x' }),
      { sh: 'echo data > orig && ln orig hard' },
      file({ op: 'read', path: 'hard' }),
      file({ op: 'grep', pattern: 'hello', glob: '*.py' }),
      { sh: `printf '${'a'.repeat(40)}!\\n' > redos.txt` },
      {
        tool: {
          op: 'file',
          request: { op: 'grep', pattern: '^(a+)+$', path: 'redos.txt' },
          limits: LIMITS,
          options: { grepFileTimeoutMs: 100 },
        },
      },
      file({ op: 'read', path: 'doc\u202etxt.exe' }),
      { tool: { op: 'snapshot' } },
      {
        sh: 'sleep 0.01; echo "print(1)" >> src/app.py && rm orig hard && mkdir out && echo r > out/result.txt',
      },
      { tool: { op: 'snapshot' } },
      { tool: { op: 'usage' } },
      { tool: { op: 'readBytes', path: 'shots/s.png' } },
      { tool: { op: 'writeBytes', path: '../escape.png', base64: png.toString('base64') } },
      file({ op: 'stat', path: 'src/app.py' }),
    ]);

    expect(outputOf(write)).toEqual({ path: 'src/app.py', bytesWritten: 32, size: 32, created: true });
    expect(outputOf(read)).toMatchObject({ encoding: 'utf8', content: 'def hello():\n    return "hello"\n' });
    expect(readBin).toEqual({ ok: true, size: png.length, realRel: 'shots/s.png' });

    for (const [answer, code] of [
      [readEscape, 'PATH_SYMLINK_ESCAPE'],
      [writeEscape, 'PATH_SYMLINK_ESCAPE'],
      [readHard, 'PATH_HARDLINK'],
      [redos, 'INVALID_PATTERN'],
      [invisible, 'PATH_INVISIBLE_CHAR'],
      [writeBytes, 'PATH_ESCAPE'],
    ] as const) {
      expect(answer.ok ? 'answered' : answer.error.code).toBe(code);
    }
    expect(readEscape).toMatchObject({
      error: {
        name: 'PathRejectedError',
        message: 'path goes through symlink esc, which leads outside the workspace',
      },
    });
    expect(reviveError(redos as Extract<WorkspaceToolAnswer, { ok: false }>).message).toBe(
      'pattern took over 100 ms on redos.txt (catastrophic backtracking?); simplify it',
    );
    expect(outputOf(grep)).toEqual({
      matches: ['src/app.py:1:def hello():', 'src/app.py:2:    return "hello"'],
      truncated: false,
    });

    const snapBefore = ok(before).snapshot as WireSnapshot;
    const snapAfter = ok(after).snapshot as WireSnapshot;
    expect(snapBefore.entries.map(([p]) => p)).toEqual([
      'esc',
      'hard',
      'orig',
      'redos.txt',
      'shots/s.png',
      'src/app.py',
    ]);
    expect(changedPaths(snapBefore, snapAfter)).toEqual(['hard', 'orig', 'out/result.txt', 'src/app.py']);

    expect(usage).toEqual({ ok: true, bytes: 32 + 9 + 42 + png.length + 2, files: 4, partial: false });
    expect(readBytes).toEqual({
      ok: true,
      base64: png.toString('base64'),
      size: png.length,
      name: 's.png',
      realRel: 'shots/s.png',
    });
    // Made by the file API as the sandbox user, with the workspace root's bits (0700: 0600 for files).
    expect(outputOf(stat)).toMatchObject({ type: 'file', size: 41, mode: '0600' });
  });

  it('answers the whole file-op table as the host backend does, on the image’s node', async () => {
    // The two trees, mounted at the same path in the container (symlink targets and sizes must match).
    const base = path.join(tmp, 'table');
    const host = await seed(base, 'host');
    const pod = await seed(base, 'pod1');
    // Both trees belong to the user the tool runs as (the sandbox user when we can chown). The host backend, run as
    // root here, gives what it creates the root's owner; so both sides make the same files with the same bits.
    const isRoot = process.getuid?.() === 0;
    const user = isRoot ? `${UID}:${UID}` : `${process.getuid?.()}:${process.getgid?.()}`;
    if (isRoot) execFileSync('chown', ['-R', `${UID}:${UID}`, base]);

    // The host first, row after row; then the same requests in one container, in the same order.
    const wants: Result[] = [];
    const steps: Step[] = [];
    let previous: Result = { ok: true, value: undefined };
    for (const row of ROWS) {
      const op = opOf(row, previous);
      const limits = { ...TABLE_LIMITS, ...row.limits };
      const files = new FileOperations(resolveWorkspaceOptions({ root: base, limits, ...row.options }));
      previous = await settle(files.execute(host, op));
      wants.push(previous);
      steps.push({
        tool: {
          op: 'file',
          root: pod,
          request: op,
          limits,
          ...(row.options ? { options: row.options } : {}),
        },
      });
    }
    const answers = await session('table-requests', steps, ['-v', `${base}:${base}`, '--user', user]);
    ROWS.forEach((row, i) => {
      expect({ row: row.name, result: fromAnswer(answers[i], (a) => a.outcome) }).toEqual({
        row: row.name,
        result: wants[i],
      });
    });
    expect(await treeOf(base, pod)).toEqual(await treeOf(base, host));
  }, 180_000); // some 80 cold node starts in a container: slow on a loaded host

  it('reads a binary file back as base64 through the file API', async () => {
    const bytes = Buffer.from([0, 1, 2, 3, 250, 251, 252, 253, 254, 255]);
    const [written, read] = await session('binary', [
      { tool: { op: 'writeBytes', path: 'bin/blob', base64: bytes.toString('base64') } },
      file({ op: 'read', path: 'bin/blob' }),
    ]);
    expect(written).toMatchObject({ ok: true, size: bytes.length });
    expect(outputOf(read)).toEqual({
      path: 'bin/blob',
      encoding: 'base64',
      content: bytes.toString('base64'),
      size: bytes.length,
      truncated: false,
    });
  });
});
