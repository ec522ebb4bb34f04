import { spawn, spawnSync, type ChildProcess, type ChildProcessWithoutNullStreams } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { detectSystemLayout } from '../src/backends/subprocess/bwrap-command';
import { RunnerConnection } from '../src/core/runner/runner-connection';
import { type RunnerEvent } from '../src/core/runner/runner-protocol';
import { TEST_IMAGE_SOURCE } from './sandbox-image';

const BWRAP = '/usr/bin/bwrap';
const RUNNER_DIR = path.resolve(__dirname, '../../../docker/sandbox/runner');
const SANDBOX_UID = 65534;
const IMAGE_UID = 10001;
export const BOX_ENV = { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/tmp' };

/** A real runner (docker/sandbox/runner/runner.py) as the main process of a bubblewrap box. @internal */
export interface RunnerBox {
  connection: RunnerConnection;
  /** Device and inode of its /workspace, as requests name it. */
  workspace: [string, string];
  /** The host directory it sees as /workspace. */
  dir: string;
  events: RunnerEvent[];
  child: ChildProcess;
  /** Resolves once the box's process is gone. */
  gone: Promise<void>;
  stderr(): string;
}

/** Fails the suite where bubblewrap cannot make namespaces (`npm test` installs it: never a skip). @internal */
export function requireBubblewrap(): void {
  const probe = spawnSync(BWRAP, ['--unshare-all', '--ro-bind', '/', '/', '--', '/bin/true'], {
    timeout: 10_000,
  });
  if (!fs.existsSync(BWRAP) || probe.status !== 0) {
    throw new Error('bubblewrap cannot create namespaces here: the runner integration tests cannot run');
  }
}

/**
 * The runner in a box laid out like the subprocess tier's: its own pid and network namespaces (its cleanup kills
 * every process it sees, and its loopback is its own), the host's system read-only, a fresh workspace. @internal
 */
export function startRunnerBox(): RunnerBox {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-runner-box-'));
  const args = [
    '--unshare-all',
    '--die-with-parent',
    '--new-session',
    '--uid',
    String(SANDBOX_UID),
    '--gid',
    String(SANDBOX_UID),
    ...detectSystemLayout().args,
    '--proc',
    '/proc',
    '--dev',
    '/dev',
    '--tmpfs',
    '/tmp',
    '--tmpfs',
    '/run/switchyard',
    '--ro-bind',
    RUNNER_DIR,
    '/opt/switchyard/runner',
    '--bind',
    dir,
    '/workspace',
    '--chdir',
    '/workspace',
    '--clearenv',
    ...Object.entries(BOX_ENV).flatMap(([k, v]) => ['--setenv', k, v]),
    '--',
    '/usr/bin/python3',
    '-I',
    '/opt/switchyard/runner/runner.py',
  ];
  return connect(spawn(BWRAP, args, { stdio: ['pipe', 'pipe', 'pipe'] }), dir);
}

/** The sandbox image the engine would use (`npm test` builds it first: a missing one fails). @internal */
export function sandboxImage(): string {
  const image =
    TEST_IMAGE_SOURCE.image ??
    (fs.existsSync(TEST_IMAGE_SOURCE.imageTagFile)
      ? fs.readFileSync(TEST_IMAGE_SOURCE.imageTagFile, 'utf8').trim()
      : undefined);
  if (!image || spawnSync('docker', ['image', 'inspect', image], { timeout: 10_000 }).status !== 0) {
    throw new Error(`no sandbox image ${image ?? '(no tag; npm run sandbox:image)'}`);
  }
  return image;
}

/**
 * The runner of the real sandbox image in a container with the pooled tier's main settings (no network, read-only
 * root, no capabilities, Docker's seccomp profile, a pids limit), removed when it stops. @internal
 */
export function startRunnerContainer(image: string, name: string): RunnerBox {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-runner-box-'));
  fs.chownSync(dir, IMAGE_UID, IMAGE_UID);
  const user = `${IMAGE_UID}:${IMAGE_UID}`;
  const args = [
    'run',
    '--rm',
    '-i',
    '--name',
    name,
    '--init',
    '--network',
    'none',
    '--user',
    user,
    '--read-only',
    '--cap-drop',
    'ALL',
    '--security-opt',
    'no-new-privileges',
    '--memory',
    '256m',
    '--pids-limit',
    '128',
    '--tmpfs',
    `/tmp:size=64m,uid=${IMAGE_UID},gid=${IMAGE_UID}`,
    '--tmpfs',
    `/run/switchyard:size=8m,uid=${IMAGE_UID},gid=${IMAGE_UID},mode=0700`,
    '-v',
    `${dir}:/workspace`,
    '-w',
    '/workspace',
    image,
    '/usr/bin/python3',
    '-I',
    '/opt/switchyard/runner/runner.py',
  ];
  return connect(spawn('docker', args, { stdio: ['pipe', 'pipe', 'pipe'] }), dir);
}

function connect(child: ChildProcessWithoutNullStreams, dir: string): RunnerBox {
  let stderr = '';
  child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-4000)));
  child.stdin.on('error', () => undefined); // a killed box: the connection reports it
  const gone = new Promise<void>((resolve) => child.once('close', () => resolve()));
  const connection = new RunnerConnection({
    stdin: child.stdin,
    stdout: child.stdout,
    closed: gone,
    close: () => child.stdin.end(),
  });
  const events: RunnerEvent[] = [];
  connection.onEvent((event) => events.push(event));
  const st = fs.statSync(dir, { bigint: true });
  return {
    connection,
    workspace: [String(st.dev), String(st.ino)],
    dir,
    events,
    child,
    gone,
    stderr: () => stderr,
  };
}

/** Closes the runner's stdin (it kills all it started, then exits), and removes the workspace. @internal */
export async function stopRunnerBox(box: RunnerBox | undefined): Promise<void> {
  if (!box) return;
  box.connection.close();
  const timer = setTimeout(() => box.child.kill('SIGKILL'), 10_000);
  await box.gone;
  clearTimeout(timer);
  fs.rmSync(box.dir, { recursive: true, force: true });
}

/** Resolves with `probe()`'s first truthy value, polling every 20 ms; rejects past `ms`. @internal */
export async function eventually<T>(
  probe: () => T | undefined | Promise<T | undefined>,
  ms = 10_000,
): Promise<T> {
  const deadline = Date.now() + ms;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}
