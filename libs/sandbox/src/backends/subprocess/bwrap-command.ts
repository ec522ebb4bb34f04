import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Language } from '@switchyard/common';
import { DEFAULT_NICE_PATH, DEFAULT_SETPRIV_PATH } from '../../core/host-tools';
import { SANDBOX_UID } from '../../core/sandbox-image';

/** Where the code file appears inside the sandbox, per language. */
export const CODE_TARGET: Record<Language, string> = {
  python: '/run/switchyard/main.py',
  node: '/run/switchyard/main.js',
  bash: '/run/switchyard/main.sh',
};

/**
 * The uid and gid code runs as inside the sandbox's user namespace: the image's sandbox user, as in the containers
 * (the host sees the engine's, or `runAs`'s, ids on what it writes).
 */
export { SANDBOX_UID };
export const WORKSPACE_TARGET = '/workspace';
/** Pipe on which bubblewrap writes its JSON status (`child-pid`, then `exit-code` once the code ran). */
export const STATUS_FD = 3;
/** Pipe bubblewrap reads its sandbox options from (`--args`); it does nothing until the engine closes it. */
export const ARGS_FD = 4;

/** Top-level system paths that interpreters need; `/usr` holds everything on merged-/usr systems. */
export const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib64', '/lib32', '/libx32'];

/** The host's /etc pieces a host layout shows: the loader's cache and Debian's alternatives (`python3`, `node`). */
const HOST_ETC_ARGS = [
  '--ro-bind-try',
  '/etc/ld.so.cache',
  '/etc/ld.so.cache',
  '--ro-bind-try',
  '/etc/alternatives',
  '/etc/alternatives',
];

export interface SystemLayout {
  /** bubblewrap arguments recreating the system paths read-only. */
  args: string[];
  /** bubblewrap arguments for /etc, before the synthetic passwd, group and hosts are bound over it. */
  etcArgs: string[];
  /** Directories visible in the sandbox at the same path (host paths of a host layout). */
  boundDirs: string[];
}

/**
 * Mirrors `/usr`, `/bin`, `/lib*` as they exist on the host: symlinks stay symlinks (Debian's merged /usr),
 * real directories are bound read-only, missing ones are skipped.
 */
export function detectSystemLayout(
  host: { lstat(p: string): fs.Stats | undefined; readlink(p: string): string } = {
    lstat: (p) => fs.lstatSync(p, { throwIfNoEntry: false }),
    readlink: (p) => fs.readlinkSync(p),
  },
): SystemLayout {
  const args: string[] = [];
  const boundDirs: string[] = [];
  for (const p of SYSTEM_PATHS) {
    const st = host.lstat(p);
    if (!st) continue;
    if (st.isSymbolicLink()) args.push('--symlink', host.readlink(p), p);
    else if (st.isDirectory()) {
      args.push('--ro-bind', p, p);
      boundDirs.push(p);
    }
  }
  return { args, etcArgs: HOST_ETC_ARGS, boundDirs };
}

/** True when `file` is inside one of `dirs`. */
export function isUnder(file: string, dirs: readonly string[]): boolean {
  return dirs.some((d) => file === d || file.startsWith(d.endsWith('/') ? d : `${d}/`));
}

export interface RlimitSettings {
  addressSpaceBytes?: number;
  fileSizeBytes: number;
  openFiles: number;
  /** RLIMIT_CPU per process; none for a session's long-lived stateful sandbox (its cgroup caps the CPU rate). */
  cpuSeconds?: number;
}

export interface SandboxLayoutInput {
  layout: SystemLayout;
  /**
   * Synthetic `/etc/passwd` and `/etc/group` with just the sandbox user, and `/etc/hosts` naming only the loopback
   * (so `localhost` resolves to the sandbox's own servers, never through a resolver).
   */
  etc: { passwd: string; group: string; hosts?: string };
  /** Further host directories to show read-only at the same path (interpreters outside /usr, extra binds). */
  /** Host directories bound read-only at `target` inside the sandbox. */
  readOnlyBinds: readonly ReadOnlyBind[];
  tmpfsBytes: number;
  /** Further size-capped writable tmpfs directories (a stateful sandbox's `/run/switchyard`). */
  extraTmpfs?: readonly string[];
}

/** Niceness of everything in a sandbox: the lowest priority, inherited by all it forks. */
export const SANDBOX_NICE = 19;

/**
 * The process the engine spawns:
 * `setpriv --pdeathsig KILL -- nice -n 19 -- prlimit <rlimits> -- bwrap <confinement> --args 4 <finish> -- <argv>`.
 *
 * Each step execs the next, so the spawned pid is bubblewrap's monitor and leads the process group. The
 * parent-death signal (kept across these execs: none is set-uid) kills the monitor when the engine dies, even
 * by SIGKILL: a pre-launched sandbox never outlives its engine, and bubblewrap's `--die-with-parent` takes the
 * sandbox with the monitor. Niceness 19 and RLIMIT_NICE 0 keep the code, and all it forks, at the lowest priority
 * without a way back up. bubblewrap blocks reading the run's own options (`buildRunArgs`) from fd 4, which lets
 * the engine put it into the run's cgroup before it creates anything: every process of the sandbox is born inside
 * the cgroup. Everything that confines lives on the command line, not in fd 4, so a launcher whose engine died
 * before writing (EOF) still starts fully confined and fails for want of a workspace. fd 3 and fd 4 must be pipes.
 */
export function buildLauncherCommand(input: {
  /** Default {@link DEFAULT_SETPRIV_PATH}. */
  setprivPath?: string;
  /** Default {@link DEFAULT_NICE_PATH}. */
  nicePath?: string;
  prlimitPath: string;
  bwrapPath: string;
  rlimits: RlimitSettings;
  sandbox: SandboxLayoutInput;
  /** Interpreter and its arguments, as seen inside the sandbox. */
  argv: readonly string[];
}): { command: string; args: string[] } {
  const r = input.rlimits;
  const s = input.sandbox;
  const tmpfs = String(s.tmpfsBytes);
  return {
    command: input.setprivPath ?? DEFAULT_SETPRIV_PATH,
    args: [
      '--pdeathsig',
      'KILL',
      '--',
      input.nicePath ?? DEFAULT_NICE_PATH,
      '-n',
      String(SANDBOX_NICE),
      '--',
      input.prlimitPath,
      '--core=0',
      '--nice=0',
      `--fsize=${r.fileSizeBytes}`,
      `--nofile=${r.openFiles}`,
      // Soft limit sends SIGXCPU (catchable), the hard one a second later SIGKILL.
      ...(r.cpuSeconds === undefined ? [] : [`--cpu=${r.cpuSeconds}:${r.cpuSeconds + 1}`]),
      ...(r.addressSpaceBytes === undefined ? [] : [`--as=${r.addressSpaceBytes}`]),
      '--',
      input.bwrapPath,
      '--unshare-all',
      '--unshare-user',
      '--disable-userns',
      '--die-with-parent',
      '--new-session',
      '--cap-drop',
      'ALL',
      '--uid',
      String(SANDBOX_UID),
      '--gid',
      String(SANDBOX_UID),
      '--hostname',
      'sandbox',
      ...s.layout.args,
      ...s.layout.etcArgs,
      '--ro-bind',
      s.etc.passwd,
      '/etc/passwd',
      '--ro-bind',
      s.etc.group,
      '/etc/group',
      ...(s.etc.hosts ? ['--ro-bind', s.etc.hosts, '/etc/hosts'] : []),
      ...s.readOnlyBinds.flatMap((b) => ['--ro-bind', b.source, b.target]),
      '--proc',
      '/proc',
      '--dev',
      '/dev',
      '--size',
      tmpfs,
      '--tmpfs',
      '/dev/shm',
      '--remount-ro',
      '/dev',
      '--size',
      tmpfs,
      '--tmpfs',
      '/tmp',
      ...(s.extraTmpfs ?? []).flatMap((dir) => ['--size', tmpfs, '--tmpfs', dir]),
      // bubblewrap's own environment is empty already; the child's comes only from the run's --setenv.
      '--clearenv',
      '--args',
      String(ARGS_FD),
      // Only /workspace, /tmp and /dev/shm stay writable; the root tmpfs would otherwise take unbounded writes.
      '--remount-ro',
      '/',
      '--chdir',
      WORKSPACE_TARGET,
      '--json-status-fd',
      String(STATUS_FD),
      '--',
      ...input.argv,
    ],
  };
}

/**
 * One run's own options, written to `ARGS_FD`: its workspace, its code file (a session's stateful sandbox has
 * none: its runner gets code over its pipe) and its environment.
 */
export function buildRunArgs(input: {
  workspaceDir: string;
  codeFile?: string;
  codeTarget?: string;
  env: Readonly<Record<string, string>>;
}): string[] {
  return [
    '--bind',
    input.workspaceDir,
    WORKSPACE_TARGET,
    ...(input.codeFile !== undefined && input.codeTarget !== undefined
      ? ['--ro-bind', input.codeFile, input.codeTarget]
      : []),
    ...Object.entries(input.env).flatMap(([k, v]) => ['--setenv', k, v]),
  ];
}

/** `--args` wire format: NUL-terminated strings. */
export function encodeArgs(args: readonly string[]): Buffer {
  return Buffer.from(args.map((a) => `${a}\0`).join(''), 'utf8');
}

export interface ReadOnlyBind {
  source: string;
  target: string;
}

/** Where interpreters outside the system dirs appear in the sandbox: a fixed path that no tmpfs covers. */
export const INTERPRETER_MOUNT = '/run/interpreters';

/**
 * How `interpreter` (a resolved host path) is reached inside the sandbox: as is when a system dir already
 * shows it, else its directory is bound under `INTERPRETER_MOUNT/<language>` (a checkout under /tmp would
 * otherwise be hidden by the sandbox's own /tmp).
 */
export function interpreterBind(
  interpreter: string,
  boundDirs: readonly string[],
  language: Language,
): { path: string; bind?: ReadOnlyBind } {
  if (isUnder(interpreter, boundDirs)) return { path: interpreter };
  const target = `${INTERPRETER_MOUNT}/${language}`;
  return {
    path: `${target}/${path.basename(interpreter)}`,
    bind: { source: path.dirname(interpreter), target },
  };
}
