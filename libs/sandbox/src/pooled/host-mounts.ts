import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { Logger } from '@nestjs/common';
import { SandboxInternalError } from '../sandbox.errors';

const run = promisify(execFile);
const COMMAND_TIMEOUT_MS = 10_000;

/** One line of /proc/self/mountinfo that matters here. */
export interface MountEntry {
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
}

/** `HostMounts` through util-linux `mount`/`umount` and /proc/self/mountinfo. */
export class ChildProcessHostMounts extends HostMounts {
  private readonly logger = new Logger(ChildProcessHostMounts.name);

  constructor(
    private readonly mountPath = '/bin/mount',
    private readonly umountPath = '/bin/umount',
    private readonly mountInfoPath = '/proc/self/mountinfo',
  ) {
    super();
  }

  async ensureSharedRoot(dir: string): Promise<void> {
    await fs.promises.mkdir(dir, { recursive: true, mode: 0o711 });
    const entry = (await this.entries()).findLast((e) => e.target === dir);
    if (entry?.shared) return;
    if (!entry) await this.exec(this.mountPath, ['--bind', dir, dir]);
    await this.exec(this.mountPath, ['--make-rshared', dir]);
    this.logger.log(`made ${dir} a shared mount point for pooled workspaces`);
  }

  async bind(source: string, target: string): Promise<void> {
    await this.exec(this.mountPath, ['--bind', '--', source, target]);
  }

  async unmount(target: string): Promise<void> {
    // A bind may have been stacked more than once (a retried claim); peel every layer.
    for (let layer = 0; layer < 8; layer++) {
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
      await run(command, args, {
        timeout: COMMAND_TIMEOUT_MS,
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

/** Mount points and their shared flag from /proc/<pid>/mountinfo text (octal escapes in paths decoded). */
export function parseMountInfo(text: string): MountEntry[] {
  const entries: MountEntry[] = [];
  for (const line of text.split('\n')) {
    const fields = line.split(' ');
    const separator = fields.indexOf('-');
    if (fields.length < 7 || separator < 6) continue;
    const target = fields[4].replace(/\\([0-7]{3})/g, (_, octal: string) =>
      String.fromCharCode(parseInt(octal, 8)),
    );
    entries.push({ target, shared: fields.slice(6, separator).some((f) => f.startsWith('shared:')) });
  }
  return entries;
}
