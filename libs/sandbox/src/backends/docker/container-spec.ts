import type { ContainerCreateOptions } from 'dockerode';
import type { Language } from '@switchyard/common';
import { CALL_DIR_TARGET, CALL_SOCKET_TARGET, withCallSocket } from '../../core/call-channel';
import type { TierJob } from '../../core/sandbox.types';
import {
  CONTAINER_TIER_LABEL,
  LABEL_ACTION,
  LABEL_ENGINE,
  LABEL_SESSION,
  LABEL_TIER,
} from './container.constants';
import type { ResolvedContainerOptions } from './container.options';
import { GVISOR_SANDBOX_PIDS, type GvisorClone3, gvisorSecurityOpt } from './gvisor';
import { HOSTS_TARGET } from './sandbox-hosts';

export const WORKSPACE_TARGET = '/workspace';
/** A tmpfs only the sandbox user can write, holding the code file. */
export const CODE_DIR = '/run/switchyard';
export const CODE_TARGET: Record<Language, string> = {
  python: `${CODE_DIR}/main.py`,
  node: `${CODE_DIR}/main.js`,
  bash: `${CODE_DIR}/main.sh`,
};

/**
 * The code reaches the container on stdin, ahead of the job's own stdin, behind a header line holding its byte length
 * (`containerStdin`), so the container's settings do not depend on the code and it can be started before the code
 * exists (`AheadContainers`). This loader reads the header (the shell's `read` takes one byte at a time from a pipe,
 * never more than the line), copies exactly that many bytes into the file `$1` (coreutils `head -c` reads no further
 * than the count, also from a pipe), then replaces itself with the interpreter, which inherits the rest of stdin. No
 * host path is involved, so it works the same when the engine itself runs in a container, and up to 1 MiB of code
 * never meets the 128 KiB argv/env string limit.
 */
export const CODE_LOADER = 'IFS= read -r n || exit 126; head -c "$n" > "$1" || exit 126; shift; exec "$@"';

/** Where a session with network finds its egress proxy's socket (its directory, mounted read-only). */
export const EGRESS_TARGET = '/run/switchyard-egress';
const EGRESS_FORWARDER = '/opt/switchyard/runner/egress_forwarder.py';
/**
 * For a session with network: the runner's forwarder (127.0.0.1:3128 → the session's proxy socket) starts first and
 * the loader waits (at most 2 s) until it listens, so the code's first request finds it.
 */
export const EGRESS_LOADER =
  `/usr/bin/python3 -I ${EGRESS_FORWARDER} ${EGRESS_TARGET}/proxy.sock /tmp/.switchyard-egress-ready & ` +
  'i=0; while [ ! -e /tmp/.switchyard-egress-ready ] && [ $i -lt 200 ]; do sleep 0.01; i=$((i+1)); done; ' +
  CODE_LOADER;

/** Runs the code file as `__main__` with its real name in tracebacks, keeping `python -c` path semantics. */
const PYTHON_BOOTSTRAP =
  `__file__ = ${JSON.stringify(CODE_TARGET.python)}; import sys; sys.argv[0] = __file__; del sys; ` +
  `exec(compile(open(__file__, 'rb').read(), __file__, 'exec'))`;

/**
 * Python without egress loads its code itself, as `CODE_LOADER` would, with no shell and no `head` started first
 * (each exec is tens of ms under gVisor's ptrace platform): the header line, one byte at a time, then exactly that many
 * bytes from fd 0 (unbuffered, so the rest of stdin is the code's), written to `argv[1]` for tracebacks and
 * `__file__`, then run as `__main__` with `python -c` path semantics and `sys.argv == [__file__]`; its own names are
 * gone before the code runs. A stdin closed before the header ends the container quietly (a container started ahead
 * and never used).
 *
 * An interpreter set up its `sys.path` from the session's user site when it started (whether the directory exists, its
 * `.pth` files, `usercustomize`). When that changed between its start and the code's arrival (a container started
 * ahead, and a `pip install --user` in another tier meanwhile), it execs a fresh python on the code file instead, so
 * the code sees what an interpreter started now would; the rest of stdin is still the code's.
 */
export const PYTHON_LOADER = [
  'import os, sys, site',
  'def _site():',
  '    d = site.getusersitepackages() if site.ENABLE_USER_SITE else None',
  '    try:',
  "        names = sorted(n for n in os.listdir(d) if n.endswith('.pth') or n == 'usercustomize.py')",
  '        return d, [(n, os.stat(os.path.join(d, n)).st_mtime_ns) for n in names]',
  '    except (OSError, TypeError):',
  '        return d, None',
  '_seen = _site()',
  'def _load(path):',
  "    line = b''",
  "    while not line.endswith(b'\\n'):",
  '        c = os.read(0, 1)',
  '        if not c: sys.exit(0)',
  '        line += c',
  "    n, data = int(line), b''",
  '    while len(data) < n:',
  '        chunk = os.read(0, n - len(data))',
  '        if not chunk: break',
  '        data += chunk',
  "    with open(path, 'wb') as f: f.write(data)",
  '    return data',
  '__file__ = sys.argv[1]',
  '_code = _load(__file__)',
  'if _site() != _seen:',
  `    os.execv(sys.executable, [sys.executable, '-c', ${JSON.stringify(PYTHON_BOOTSTRAP)}])`,
  'sys.argv[:] = [__file__]',
  'del os, sys, site, _site, _seen, _load',
  "exec(compile(globals().pop('_code'), __file__, 'exec'))",
].join('\n');

export interface ContainerSpecInput {
  job: Pick<
    TierJob,
    'actionId' | 'sessionId' | 'language' | 'code' | 'env' | 'workspaceDir' | 'egress' | 'channel'
  >;
  image: string;
  options: Pick<ResolvedContainerOptions, 'limits' | 'engineInstanceId' | 'user' | 'interpreters'> &
    Partial<Pick<ResolvedContainerOptions, 'readOnlyBinds'>>;
  /** Container name; Docker picks one when absent. */
  name?: string;
  /** Docker runtime (`runsc`: gVisor); the daemon's default when absent. */
  runtime?: string;
  /** Host path of the read-only /etc/hosts (see `SandboxHostsFile`). */
  hostsFile: string;
  /** On `runsc`: how its seccomp profile treats `clone3` (`GvisorSeccompProbe`). Default `runtime` (Debian's runsc). */
  gvisorClone3?: GvisorClone3;
}

/**
 * Create options of one run's container: every setting of SECURITY.md's container section, and nothing from the
 * engine's own environment (`Env` is exactly `job.env`, on top of the image's `ENV`, plus the path of the run's call
 * channel socket when it has one).
 */
export function buildContainerSpec({
  job,
  image,
  options,
  name,
  runtime,
  hostsFile,
  gvisorClone3 = 'runtime',
}: ContainerSpecInput): ContainerCreateOptions {
  const { limits } = options;
  const codeBytes = Buffer.byteLength(job.code, 'utf8');
  const [uid, gid = uid] = options.user.split(':');
  return {
    ...(name === undefined ? {} : { name }),
    Image: image,
    User: options.user,
    WorkingDir: WORKSPACE_TARGET,
    // The loader is the entrypoint, so whatever entrypoint the image declares never runs first.
    ...(job.language === 'python' && !job.egress
      ? {
          Entrypoint: [options.interpreters.python, '-c', PYTHON_LOADER],
          Cmd: [CODE_TARGET.python],
        }
      : {
          Entrypoint: ['/bin/sh', '-c', job.egress ? EGRESS_LOADER : CODE_LOADER, 'switchyard-loader'],
          Cmd: [
            CODE_TARGET[job.language],
            ...interpreterArgv(job.language, options.interpreters[job.language]),
          ],
        }),
    Env: Object.entries(withCallSocket(job.env, job.channel && CALL_SOCKET_TARGET)).map(
      ([key, value]) => `${key}=${value}`,
    ),
    Labels: {
      [LABEL_ENGINE]: options.engineInstanceId,
      [LABEL_SESSION]: job.sessionId,
      [LABEL_TIER]: CONTAINER_TIER_LABEL,
      [LABEL_ACTION]: job.actionId,
    },
    // stdin carries the code, then the job's stdin; it is closed after both, like a pipe.
    ...ATTACHED_STDIO,
    // No network setup at all: the container gets a network namespace of its own holding only `lo` (runc brings it
    // up; gVisor, run with `--network=none`, makes its own), as with `NetworkMode: none` below, which stays as a
    // second guard, but without the daemon's sandbox set-up, about 100 ms of every run. Docker then leaves
    // /etc/hosts empty, hence the bind of `hostsFile`.
    NetworkDisabled: true,
    HostConfig: {
      ...(runtime === undefined ? {} : { Runtime: runtime }),
      Binds: [
        `${job.workspaceDir}:${WORKSPACE_TARGET}:rw`,
        `${hostsFile}:${HOSTS_TARGET}:ro`,
        // The session's proxy socket; nothing else of the host. Read-only: it can be connected to, not replaced.
        ...(job.egress ? [`${job.egress.socketDir}:${EGRESS_TARGET}:ro`] : []),
        // The action's call channel, the same way: its socket and nothing else, never a network (runsc reaches a
        // host socket through `--host-uds=open`, which the daemon registers it with).
        ...(job.channel ? [`${job.channel.socketDir}:${CALL_DIR_TARGET}:ro`] : []),
        // What the operator shares with every sandbox (extra trusted CAs), at the same path, read-only.
        ...(options.readOnlyBinds ?? []).map((p) => `${p}:${p}:ro`),
      ],
      ...sandboxHostConfig({
        memoryBytes: limits.memoryBytes,
        nanoCpus: limits.nanoCpus,
        pids: limits.pids + (runtime === 'runsc' ? GVISOR_SANDBOX_PIDS : 0),
        openFiles: limits.nofile,
        fileSizeBytes: limits.fsizeBytes,
        tmpfsBytes: limits.tmpfsBytes,
      }),
      // gVisor applies the seccomp profile itself, and needs its own (see gvisor.ts).
      ...(runtime === 'runsc' && { SecurityOpt: gvisorSecurityOpt(gvisorClone3) }),
      Tmpfs: {
        ...sandboxTmpfs(limits.tmpfsBytes),
        [CODE_DIR]: `rw,nosuid,nodev,noexec,size=${formatSize(codeTmpfsBytes(codeBytes))},nr_inodes=${CODE_TMPFS_INODES},mode=0700,uid=${uid},gid=${gid}`,
      },
    },
  };
}

/**
 * Every sandbox container talks to the engine over its attach connection only: stdin open until the engine closes
 * it (once), stdout and stderr apart, no terminal.
 */
export const ATTACHED_STDIO = {
  AttachStdin: true,
  AttachStdout: true,
  AttachStderr: true,
  OpenStdin: true,
  StdinOnce: true,
  Tty: false,
} as const satisfies Partial<ContainerCreateOptions>;

/** Resource limits every sandbox container gets. */
export interface SandboxContainerLimits {
  memoryBytes: number;
  nanoCpus: number;
  pids: number;
  openFiles: number;
  fileSizeBytes: number;
  tmpfsBytes: number;
}

/**
 * SECURITY.md's container settings, shared by the one-off and pooled tiers so they cannot drift apart. Each tier
 * adds its own mounts and its code tmpfs (`sandboxTmpfs` gives the common /tmp).
 */
export function sandboxHostConfig(
  limits: SandboxContainerLimits,
): NonNullable<ContainerCreateOptions['HostConfig']> {
  return {
    Privileged: false,
    CapDrop: ['ALL'],
    SecurityOpt: ['no-new-privileges'],
    ReadonlyRootfs: true,
    ShmSize: limits.tmpfsBytes,
    NetworkMode: 'none',
    IpcMode: 'private',
    PidsLimit: limits.pids,
    Memory: limits.memoryBytes,
    MemorySwap: limits.memoryBytes,
    NanoCpus: limits.nanoCpus,
    // Not `nproc`: it counts every process of the host uid, across all containers.
    Ulimits: [
      { Name: 'nofile', Soft: limits.openFiles, Hard: limits.openFiles },
      { Name: 'fsize', Soft: limits.fileSizeBytes, Hard: limits.fileSizeBytes },
      { Name: 'core', Soft: 0, Hard: 0 },
    ],
    Init: true,
    // Untrusted output must never land in the daemon's log files; it is read over the attach stream only.
    LogConfig: { Type: 'none', Config: {} },
    AutoRemove: false,
    RestartPolicy: { Name: 'no' },
  };
}

/**
 * The size- and inode-capped, world-writable (sticky) /tmp of every sandbox container. Without `nr_inodes`, a fill
 * of empty files costs no bytes and stops only at the memory limit; with it, it stops at ENOSPC like a byte fill.
 */
export function sandboxTmpfs(tmpfsBytes: number): Record<string, string> {
  return {
    '/tmp': `rw,nosuid,nodev,size=${formatSize(tmpfsBytes)},nr_inodes=${tmpfsInodes(tmpfsBytes)},mode=1777`,
  };
}

/** One inode per 4 KiB page of the tmpfs, at least 1024. */
export function tmpfsInodes(tmpfsBytes: number): number {
  return Math.max(1024, Math.floor(tmpfsBytes / 4096));
}

/** The code tmpfs holds one code file; the few inodes keep the sandbox user from filling it with empty ones. */
export const CODE_TMPFS_INODES = 16;

/**
 * The code tmpfs holds the code file: room for any code up to `CODE_TMPFS_FLOOR` (the default largest code) in one
 * size, so the container's settings are the same whatever the code (see `CODE_LOADER`), more for larger code.
 */
export const CODE_TMPFS_FLOOR = 1024 * 1024;
function codeTmpfsBytes(codeBytes: number): number {
  return Math.max(codeBytes, CODE_TMPFS_FLOOR) + 4096;
}

/** What the tier writes to the container's stdin: a line with the code's byte length, the code, then the job's stdin. */
export function containerStdin(job: Pick<TierJob, 'code' | 'stdin'>): Buffer {
  const code = Buffer.from(job.code, 'utf8');
  const parts = [Buffer.from(`${code.length}\n`), code];
  if (job.stdin) parts.push(Buffer.from(job.stdin, 'utf8'));
  return Buffer.concat(parts);
}

function interpreterArgv(language: Language, interpreter: string): string[] {
  switch (language) {
    case 'python':
      // The user site is on: it is the session's home (HOME), where what the session installed with pip lives, as
      // in every tier (its .pth files are the session's own code, run in this sandbox).
      return [interpreter, '-c', PYTHON_BOOTSTRAP];
    case 'node':
      return [interpreter, CODE_TARGET.node];
    case 'bash':
      return [interpreter, '--noprofile', '--norc', CODE_TARGET.bash];
  }
}

/** tmpfs size option: `64m`, `68k`, or bytes. */
function formatSize(bytes: number): string {
  if (bytes % (1024 * 1024) === 0) return `${bytes / (1024 * 1024)}m`;
  if (bytes % 1024 === 0) return `${bytes / 1024}k`;
  return String(bytes);
}
