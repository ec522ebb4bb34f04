import type { KubeClient } from './kube-client';
import { RUNNER_CONTAINER } from './kubernetes.constants';
import { SessionPodError } from './kubernetes.errors';
import type { RawRunRequest, RawRunResult } from './pod-runs';
import { WORKSPACE_PATH } from './pod-spec';

/**
 * Up to this size a workspace copy goes through the runner's own protocol (no new connection: ~10-15 ms for a small
 * workspace); past it through an exec of `tar` with raw bytes on its stdin/stdout (one WebSocket and a `runc exec`,
 * ~80 ms, then no base64 and no JSON: 10 MB in ~250-370 ms against ~480-820 ms through the runner; measured on the
 * test cluster, runner at 0.5 CPU). The runner also caps a request line at 32 MiB.
 */
export const RUNNER_TAR_MAX_BYTES = 1024 * 1024;
/** What a runner-side tarOut answers when the workspace is too big for it: the engine then execs `tar` instead. */
const TOO_BIG_EXIT = 99;
const TAR_TIMEOUT_MS = 120_000;

/** GNU tar's "some files changed while being read": the archive is still complete. */
const TAR_FILES_CHANGED = 1;
/**
 * The entries of /workspace, not `.` itself (the emptyDir's root: its owner and mode are not the sandbox user's).
 * POSIX (pax) format: mtimes keep their nanoseconds, as a host workspace's checkpoint keeps them (GNU's format rounds
 * them to the second); atime and ctime records are left out (extraction cannot set a ctime, and reading changes atimes).
 */
const TAR_CREATE =
  `cd ${WORKSPACE_PATH} && find . -mindepth 1 -maxdepth 1 -printf '%P\\0' | ` +
  'tar -c -f - --format=posix --pax-option=delete=atime,delete=ctime --numeric-owner --null -T -';
/** /workspace itself is the emptyDir's root, owned by root: its own times and mode are never touched. */
const TAR_EXTRACT = `tar -x -p -f - --no-overwrite-dir -C ${WORKSPACE_PATH}`;
/**
 * Takes the fifos, sockets and devices out of /workspace, as the engine's tree tool does to a host workspace's fork:
 * a checkpoint keeps files, directories and links only. A directory that lost one gets its times back (tar set
 * them; one the code made read-only is opened for the unlink and closed again), but for /workspace itself, whose
 * mode and times are never the workspace's (see `TAR_EXTRACT`). Python, in the pod, because names are bytes; links are
 * never followed.
 */
const PRUNE_SPECIALS =
  "python3 -I -S -c 'import os, stat\n" +
  `top = b"${WORKSPACE_PATH}"\n` +
  'for root, dirs, files in os.walk(top):\n' +
  '    before = None\n' +
  '    for name in files:\n' +
  '        p = os.path.join(root, name)\n' +
  '        m = os.lstat(p).st_mode\n' +
  '        if stat.S_ISREG(m) or stat.S_ISLNK(m):\n' +
  '            continue\n' +
  '        if before is None:\n' +
  '            before = os.lstat(root)\n' +
  '            if root != top:\n' +
  '                os.chmod(root, stat.S_IMODE(before.st_mode) | 0o700)\n' +
  '        os.unlink(p)\n' +
  '    if before is not None and root != top:\n' +
  '        os.chmod(root, stat.S_IMODE(before.st_mode))\n' +
  "        os.utime(root, ns=(before.st_atime_ns, before.st_mtime_ns))'";
/** Empties /workspace (not itself: it is a mount point), also what the code made read-only. */
const EMPTY_WORKSPACE =
  `find ${WORKSPACE_PATH} -mindepth 1 -type d ! -perm -u=rwx -exec chmod u+rwx {} + 2>/dev/null || true; ` +
  `find ${WORKSPACE_PATH} -mindepth 1 -delete`;

/** How a copy reaches the pod: its runner (for small copies) and exec (for large ones). */
export interface TarTarget {
  podName: string;
  /** A fresh run through the pod's runner. */
  raw(request: RawRunRequest): Promise<RawRunResult>;
}

export interface TarLimits {
  /** Largest archive accepted out of a pod (the workspace cap plus tar's overhead). */
  maxBytes: number;
}

/**
 * The pod's /workspace as a tar archive (uncompressed, numeric owners, paths `./…`). The archive is the sandbox's
 * output: whoever unpacks it on the host must treat it as untrusted (symlinks, `..`, device entries, sizes).
 */
export async function tarOut(client: KubeClient, target: TarTarget, limits: TarLimits): Promise<Buffer> {
  const small = await target.raw({
    language: 'bash',
    code:
      `size=$(du -sb --apparent-size ${WORKSPACE_PATH} | cut -f1); ` +
      `if [ "$size" -gt ${RUNNER_TAR_MAX_BYTES} ]; then exit ${TOO_BIG_EXIT}; fi; ${TAR_CREATE}`,
    timeoutMs: TAR_TIMEOUT_MS,
    capBytes: RUNNER_TAR_MAX_BYTES * 2,
  });
  if (small.exitCode !== TOO_BIG_EXIT)
    return checked('tar out', small.exitCode, small.stdout, small.stderr, small.capped.stdout);
  const big = await client.exec(target.podName, RUNNER_CONTAINER, ['/bin/sh', '-c', TAR_CREATE], {
    timeoutMs: TAR_TIMEOUT_MS,
    maxOutputBytes: limits.maxBytes,
  });
  return checked('tar out', big.exitCode, big.stdout, big.stderr, false);
}

/** How `tarIn` unpacks. */
export interface TarInOptions {
  /** Empty /workspace first, so that what the tar lacks is gone. */
  replace: boolean;
  /** Leave only files, directories and links (a checkpoint's restore or fork): fifos and sockets are taken out. */
  dataOnly?: boolean;
}

/**
 * Unpacks `tar` into the pod's /workspace; with `replace`, /workspace is emptied first so that deletions propagate.
 * The device and inode of /workspace do not change (its contents do).
 */
export async function tarIn(
  client: KubeClient,
  target: TarTarget,
  tar: Buffer,
  options: TarInOptions,
): Promise<void> {
  const script = `set -e; ${options.replace ? `${EMPTY_WORKSPACE}; ` : ''}`;
  const after = options.dataOnly ? `; ${PRUNE_SPECIALS}` : '';
  if (tar.length <= RUNNER_TAR_MAX_BYTES) {
    const r = await target.raw({
      language: 'bash',
      code: `${script}base64 -d | ${TAR_EXTRACT}${after}`,
      stdin: tar.toString('base64'),
      timeoutMs: TAR_TIMEOUT_MS,
      capBytes: 64 * 1024,
    });
    checked('tar in', r.exitCode, r.stdout, r.stderr, false, true);
    return;
  }
  const r = await client.exec(
    target.podName,
    RUNNER_CONTAINER,
    ['/bin/sh', '-c', `${script}${TAR_EXTRACT}${after}`],
    {
      stdin: tar,
      timeoutMs: TAR_TIMEOUT_MS,
      maxOutputBytes: 64 * 1024,
    },
  );
  checked('tar in', r.exitCode, r.stdout, r.stderr, false, true);
}

function checked(
  what: string,
  exitCode: number | null,
  stdout: Buffer,
  stderr: Buffer,
  capped: boolean,
  strict = false,
): Buffer {
  if (capped) throw new SessionPodError('WORKSPACE_TAR', `${what}: the archive is over the cap`);
  if (exitCode === 0 || (!strict && exitCode === TAR_FILES_CHANGED)) return stdout;
  const why = stderr.toString('utf8').trim().split('\n').slice(-5).join('; ');
  throw new SessionPodError(
    'WORKSPACE_TAR',
    `${what} failed (exit ${String(exitCode)}): ${why || 'no message'}`,
    {
      retriable: exitCode === null,
    },
  );
}
