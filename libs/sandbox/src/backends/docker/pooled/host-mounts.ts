import * as fs from 'node:fs';
import * as path from 'node:path';
import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import { runCommand } from '@switchyard/common';
import { SandboxInternalError } from '../../../core/sandbox.errors';
import { MountHelper, type MountReply, type MountRequest } from './mount-helper';

const COMMAND_TIMEOUT_MS = 10_000;

/** Per mount root, the last `ensureSharedRoot` or `releaseSharedRoot` of this process: they run one at a time. */
const rootLocks = new Map<string, Promise<unknown>>();

/** One line of /proc/self/mountinfo that matters here. */
export interface MountEntry {
  /** Mount id, and that of the mount it sits on. */
  id: string;
  parent: string;
  /** `major:minor` of the filesystem. */
  device: string;
  /** The directory of that filesystem seen at `target` (`/` unless a bind mount). */
  root: string;
  target: string;
  /** `shared:N` present: mounts made below it propagate to its peers and slaves. */
  shared: boolean;
}

/**
 * Host mount operations of the pooled tier. The engine must be root (or hold CAP_SYS_ADMIN in the daemon's mount
 * namespace). Every method rejects with a `SandboxInternalError` (code `HOST_MOUNT`) naming the command.
 */
export abstract class HostMounts {
  /**
   * Makes `dir` a mount point with shared propagation (a bind mount onto itself, then `--make-rshared`), unless
   * it already is one. A container bind-mounting a subdirectory with `rslave` propagation then receives every mount
   * later made inside that subdirectory, and only those.
   */
  abstract ensureSharedRoot(dir: string): Promise<void>;
  /** `mount --bind source target` (not recursive: mounts below `source` are not exposed). */
  abstract bind(source: string, target: string): Promise<void>;
  /** Unmounts whatever is mounted on `target`, all layers; a no-op when nothing is. */
  abstract unmount(target: string): Promise<void>;
  /** Mount points strictly below `dir`, deepest first. */
  abstract mountsUnder(dir: string): Promise<string[]>;
  /**
   * Undoes `ensureSharedRoot` at shutdown when nothing uses `dir` any more (no entry in it, no mount below it: no
   * container of any engine sharing the root), so a stopped engine leaves no mount behind. Only a bind of `dir` onto
   * itself is removed, never a filesystem an operator mounted there. Resolves whether it unmounted. The default, for
   * adapters that make no mount, keeps everything.
   */
  releaseSharedRoot(_dir: string): Promise<boolean> {
    return Promise.resolve(false);
  }
  /** Releases what the adapter holds (a helper process). Later calls still work, perhaps slower. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}

export interface ChildProcessHostMountsOptions {
  /** Interpreter of the mount helper; without it every mount starts `mountPath`. Default `/usr/bin/python3`. */
  python?: string;
  mountPath?: string;
  umountPath?: string;
  mountInfoPath?: string;
}

/** At most this many layers are peeled off one mount point (a bind stacked by retried claims). */
const MAX_LAYERS = 8;

/**
 * `HostMounts` through a long-lived helper process making the mount syscalls (`MountHelper`: a claim's bind costs a
 * pipe round trip), falling back to util-linux `mount`/`umount` when the helper cannot run; /proc/self/mountinfo for
 * the rest.
 */
export class ChildProcessHostMounts extends HostMounts implements OnApplicationShutdown {
  private readonly logger = new Logger(ChildProcessHostMounts.name);
  private readonly helper: MountHelper;
  private readonly mountPath: string;
  private readonly umountPath: string;
  private readonly mountInfoPath: string;

  constructor(options: ChildProcessHostMountsOptions = {}) {
    super();
    this.helper = new MountHelper(options.python ?? '/usr/bin/python3', COMMAND_TIMEOUT_MS);
    this.mountPath = options.mountPath ?? '/bin/mount';
    this.umountPath = options.umountPath ?? '/bin/umount';
    this.mountInfoPath = options.mountInfoPath ?? '/proc/self/mountinfo';
  }

  async ensureSharedRoot(dir: string): Promise<void> {
    // Started now, so that the first claim does not pay for it.
    const helper = this.helper.start();
    // One at a time per directory in this process: two engines starting together (tests, replicas in one process)
    // would otherwise both look, both bind, and leave a layer that is not shared (Docker then refuses to start a
    // container below it), or one's release would run between the other's look and its bind.
    const previous = rootLocks.get(dir) ?? Promise.resolve();
    const mine = previous.catch(() => undefined).then(() => this.makeShared(dir));
    rootLocks.set(dir, mine);
    try {
      await mine;
    } finally {
      if (rootLocks.get(dir) === mine) rootLocks.delete(dir);
    }
    if (!(await helper)) this.logger.warn('no mount helper: every claim starts `mount` (slower claims)');
  }

  private async makeShared(dir: string): Promise<void> {
    await fs.promises.mkdir(dir, { recursive: true, mode: 0o711 });
    const entry = (await this.entries()).findLast((e) => e.target === dir);
    if (!entry?.shared) {
      if (!entry) await this.exec(this.mountPath, ['--bind', dir, dir]);
      await this.exec(this.mountPath, ['--make-rshared', dir]);
      this.logger.log(`made ${dir} a shared mount point for pooled workspaces`);
    }
  }

  async bind(source: string, target: string): Promise<void> {
    const reply = await this.viaHelper({ op: 'bind', source, target });
    if (reply === undefined) return this.exec(this.mountPath, ['--bind', '--', source, target]);
    if (!reply.ok) throw mountError(`mount --bind ${source} ${target}`, reply);
  }

  async unmount(target: string): Promise<void> {
    for (let layer = 0; layer < MAX_LAYERS; layer++) {
      const reply = await this.viaHelper({ op: 'umount', target });
      if (reply === undefined) return this.unmountWithCommand(target);
      if (reply.ok) continue;
      // Not (or no longer) a mount point: done.
      if (reply.errno === 'EINVAL' || reply.errno === 'ENOENT') return;
      if (reply.errno !== 'EBUSY') throw mountError(`umount ${target}`, reply);
      // Busy: detach it now, the kernel finishes once the last user is gone.
      this.logger.warn(`umount ${target} failed (${reply.message}); detaching lazily`);
      const detached = await this.viaHelper({ op: 'umount', target, detach: true });
      if (detached && !detached.ok && detached.errno !== 'EINVAL') {
        throw mountError(`umount -l ${target}`, detached);
      }
    }
  }

  override async releaseSharedRoot(dir: string): Promise<boolean> {
    const previous = rootLocks.get(dir) ?? Promise.resolve();
    const mine = previous.catch(() => undefined).then(() => this.release(dir));
    rootLocks.set(dir, mine);
    try {
      return await mine;
    } finally {
      if (rootLocks.get(dir) === mine) rootLocks.delete(dir);
    }
  }

  private async release(dir: string): Promise<boolean> {
    let released = false;
    // Two engines starting at once may each have bound it: peel every self-bind layer.
    for (let layer = 0; layer < MAX_LAYERS; layer++) {
      const entries = await this.entries();
      const top = entries.findLast((e) => e.target === dir);
      if (!top || !isSelfBind(top, entries)) return released;
      const entriesInDir = await fs.promises.readdir(dir).catch(() => []);
      if (entriesInDir.length > 0 || entries.some((e) => e.target.startsWith(`${dir}/`))) return released;
      // Never lazily: busy means a process still works in it, and then the mount stays.
      const reply = await this.viaHelper({ op: 'umount', target: dir });
      if (reply === undefined) {
        try {
          await this.exec(this.umountPath, ['--', dir]);
        } catch (err) {
          this.logger.warn(`kept the mount of ${dir}: ${(err as Error).message}`);
          return released;
        }
      } else if (!reply.ok) {
        if (reply.errno !== 'EBUSY') throw mountError(`umount ${dir}`, reply);
        this.logger.warn(`kept the mount of ${dir}: it is busy`);
        return released;
      }
      released = true;
    }
    return released;
  }

  onApplicationShutdown(): Promise<void> {
    return this.close();
  }

  override close(): Promise<void> {
    this.helper.close();
    return Promise.resolve();
  }

  /**
   * The helper's answer, or undefined when there is no helper or it failed to answer (it died, or hung and was
   * killed): the caller then uses the command. A bind the helper made before dying gets stacked once more, which
   * `unmount` peels off like any layer.
   */
  private async viaHelper(request: MountRequest): Promise<MountReply | undefined> {
    if (!(await this.helper.start())) return undefined;
    try {
      return await this.helper.call(request);
    } catch (err) {
      this.logger.warn(
        `mount helper: ${(err as Error).message}; using ${path.basename(this.mountPath)} instead`,
      );
      return undefined;
    }
  }

  private async unmountWithCommand(target: string): Promise<void> {
    // A bind may have been stacked more than once (a retried claim); peel every layer.
    for (let layer = 0; layer < MAX_LAYERS; layer++) {
      if (!(await this.entries()).some((e) => e.target === target)) return;
      try {
        await this.exec(this.umountPath, ['--', target]);
      } catch (err) {
        // Busy: detach it now, the kernel finishes once the last user is gone.
        this.logger.warn(`umount ${target} failed (${(err as Error).message}); detaching lazily`);
        await this.exec(this.umountPath, ['-l', '--', target]);
      }
    }
  }

  async mountsUnder(dir: string): Promise<string[]> {
    const prefix = dir.endsWith('/') ? dir : `${dir}/`;
    const targets = (await this.entries()).map((e) => e.target).filter((t) => t.startsWith(prefix));
    return [...new Set(targets)].sort((a, b) => b.split('/').length - a.split('/').length);
  }

  private async entries(): Promise<MountEntry[]> {
    return parseMountInfo(await fs.promises.readFile(this.mountInfoPath, 'utf8'));
  }

  private async exec(command: string, args: string[]): Promise<void> {
    this.logger.debug(`${path.basename(command)} ${args.join(' ')}`);
    try {
      await runCommand(command, args, {
        timeoutMs: COMMAND_TIMEOUT_MS,
        env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' },
      });
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new SandboxInternalError(
        'HOST_MOUNT',
        `${path.basename(command)} ${args.join(' ')} failed: ${(e.stderr ?? '').trim() || e.message}`,
        { retriable: true, cause: err },
      );
    }
  }
}

function mountError(what: string, reply: MountReply): SandboxInternalError {
  const why = `${reply.errno ?? ''} ${reply.message ?? ''}`.trim();
  return new SandboxInternalError('HOST_MOUNT', `${what} failed: ${why}`, { retriable: true });
}

/** Mount points and their shared flag from /proc/<pid>/mountinfo text (octal escapes in paths decoded). */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  const decode = (field: string) =>
    field.replace(/\\([0-7]{3})/g, (_, octal: string) => String.fromCharCode(parseInt(octal, 8)));
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-');
    if (fields.length < 7 || separator < 6) continue;
    entries.push({
      id: fields[0],
      parent: fields[1],
      device: fields[2],
      root: decode(fields[3]),
      target: decode(fields[4]),
      shared: fields.slice(6, separator).some((f) => f.startsWith('shared:')),
    });
  }
  return entries;
}

/**
 * True when `entry` shows at its target the very directory it covers (a bind of the directory onto itself, what
 * `ensureSharedRoot` makes): same filesystem as the mount it sits on, and the same directory of it.
 */
export function isSelfBind(entry: MountEntry, entries: readonly MountEntry[]): boolean {
  const under = entries.find((e) => e.id === entry.parent);
  if (!under || under.device !== entry.device) return false;
  const relative = path.posix.relative(under.target, entry.target);
  if (relative.startsWith('..')) return false;
  return path.posix.join(under.root, relative) === entry.root;
}
