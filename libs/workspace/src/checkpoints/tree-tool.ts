import { existsSync, lstatSync, readlinkSync } from 'node:fs';
import { Logger } from '@nestjs/common';
import { HelperUnavailable, JsonLineHelper } from '../json-line-helper';
import type { TreeCounts, TreeDiff } from './checkpoint.types';
import { TREE_TOOL_SOURCE } from './tree-tool-script';

/** What a sync did: entries copied (reflinked where the filesystem allows), removed, kept as they were. */
export interface SyncStats {
  copied: number;
  removed: number;
  kept: number;
  /** Fifos, sockets and devices, which are not data and are not copied. */
  skipped: number;
  /** Bytes actually copied (0 when every file was a reflink). */
  bytesCopied: number;
}

/** How files of the two trees are known to be the same (see the tool's source). */
export type Trust = 'inode' | 'content';

export interface DiffLimits {
  /** Entries listed before the answer is cut (`truncated`). */
  maxEntries: number;
  /** Text files up to this size (both sides) get a unified diff. */
  maxTextBytes: number;
  /** Total size of the unified diffs in one answer. */
  maxDiffBytes: number;
}

export interface TreeToolOptions {
  /** Directories the tool works in: the only host paths its jail shows (read-write, at the same path). */
  binds: string[];
  python?: string;
  /** bubblewrap, for the jail; null (or missing) runs the tool unjailed (with a warning). */
  bwrap?: string | null;
  /** One request's limit (a restore of a large workspace copies it). Default 10 minutes. */
  requestTimeoutMs?: number;
}

interface Reply {
  ok: boolean;
  errno?: string;
  message?: string;
  path?: string | null;
}

const START_TIMEOUT_MS = 10_000;
/** Capabilities the tool needs as root over files of the sandbox uid: read, create, own and time them. */
const CAPS = ['CAP_CHOWN', 'CAP_DAC_OVERRIDE', 'CAP_DAC_READ_SEARCH', 'CAP_FOWNER', 'CAP_FSETID'];
const SYSTEM_PATHS = ['/usr', '/bin', '/sbin', '/lib', '/lib64'];

/** A request the tool could not carry out; `code` is the errno (`ENOSPC`, `ELOOP`…). */
export class TreeToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Counts, copies and compares workspace trees for checkpoints through one long-lived Python process (the tree
 * tool, `tree_tool.py`), which works relative to directory fds and never follows a link inside a tree. It
 * runs as the engine's user (root, to keep files' owners) inside a bubblewrap jail that shows only the system
 * directories and `binds`, with just the capabilities it needs and no network: should a racing sandbox ever trick
 * it, there is nothing else to reach. Mounts made under a bind afterwards reach the jail when the bind is a shared
 * mount (the quota makes `.roots` one).
 */
export class TreeTool {
  private readonly logger = new Logger('TreeTool');
  private readonly helper: JsonLineHelper<object, Reply>;

  constructor(options: TreeToolOptions) {
    const python = options.python ?? '/usr/bin/python3';
    const toolArgs = ['-I', '-S', '-c', TREE_TOOL_SOURCE];
    const bwrap = options.bwrap === undefined ? findBwrap() : options.bwrap;
    if (!bwrap) this.logger.warn('bubblewrap not found: the checkpoint tree tool runs without its jail');
    const [command, args] = bwrap
      ? [bwrap, [...jailArgs(options.binds), '--', python, ...toolArgs]]
      : [python, toolArgs];
    this.helper = new JsonLineHelper({
      name: 'checkpoint tree tool',
      command,
      args,
      env: { PATH: '/usr/bin:/bin', LANG: 'C.UTF-8' },
      startTimeoutMs: START_TIMEOUT_MS,
      requestTimeoutMs: options.requestTimeoutMs ?? 600_000,
      logger: this.logger,
    });
  }

  /** Starts the process, so that the first checkpoint does not wait for it. */
  async start(): Promise<void> {
    await this.helper.start();
  }

  close(): void {
    this.helper.close();
  }

  /**
   * Files (regular files and symlinks), directories and bytes of regular files under `root`: what a checkpoint of it
   * keeps (fifos, sockets and devices are not counted).
   */
  async count(root: string): Promise<TreeCounts> {
    return (await this.call({ op: 'count', root })) as unknown as TreeCounts;
  }

  /** Makes the existing directory `dst` hold exactly what `src` holds: entries, modes, owners, times. */
  async sync(src: string, dst: string, trust: Trust): Promise<SyncStats> {
    return (await this.call({ op: 'sync', src, dst, trust })) as unknown as SyncStats;
  }

  /** Removes the fifos, sockets and devices under `root` (a fork's copy): a checkpoint keeps none. */
  async prune(root: string): Promise<{ dropped: number }> {
    return (await this.call({ op: 'prune', root })) as unknown as { dropped: number };
  }

  /** What changed from tree `a` to tree `b`. */
  async diff(a: string, b: string, trust: Trust, limits: DiffLimits): Promise<TreeDiff> {
    return (await this.call({ op: 'diff', a, b, trust, ...limits })) as unknown as TreeDiff;
  }

  private async call(request: object): Promise<Record<string, unknown>> {
    let reply: Reply;
    try {
      reply = await this.helper.call(request);
    } catch (err) {
      if (err instanceof HelperUnavailable) throw new TreeToolError('EAGAIN', err.message);
      throw err;
    }
    if (!reply.ok) {
      const where = reply.path ? ` (${reply.path})` : '';
      throw new TreeToolError(reply.errno ?? 'EIO', `${reply.message ?? 'failed'}${where}`);
    }
    const { ok: _ok, id: _id, ...rest } = reply as Reply & { id?: number };
    return rest;
  }
}

function findBwrap(): string | null {
  return ['/usr/bin/bwrap', '/bin/bwrap'].find((p) => existsSync(p)) ?? null;
}

/**
 * bubblewrap arguments: system directories read-only (symlinks kept, as on merged-/usr systems), `binds`
 * read-write at the same path, fresh pid/ipc/uts/network namespaces, every capability dropped but the few the tool
 * needs. No user namespace for root: the tool must set files' real owners.
 */
export function jailArgs(binds: string[]): string[] {
  const args = ['--die-with-parent', '--new-session', '--unshare-pid', '--unshare-ipc', '--unshare-uts'];
  args.push('--unshare-net', '--unshare-cgroup-try', '--dev', '/dev', '--tmpfs', '/tmp');
  for (const p of SYSTEM_PATHS) {
    const st = lstatSync(p, { throwIfNoEntry: false });
    if (st?.isSymbolicLink()) args.push('--symlink', readlinkSync(p), p);
    else if (st?.isDirectory()) args.push('--ro-bind', p, p);
  }
  for (const dir of binds) args.push('--bind', dir, dir);
  // Not root (an engine without workspace images): a user namespace of its own, where its files are its own.
  if (process.getuid?.() !== 0) return [...args, '--unshare-user'];
  args.push('--cap-drop', 'ALL');
  for (const cap of CAPS) args.push('--cap-add', cap);
  return args;
}
