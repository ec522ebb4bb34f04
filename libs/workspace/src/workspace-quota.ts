import { Logger } from '@nestjs/common';
import { execFile } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { mkdir, open, readdir, rm, rmdir } from 'node:fs/promises';
import * as path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);
const MIN_IMAGE_BYTES = 8 * 2 ** 20;

/**
 * Caps a workspace's total size and file count for everything that writes it, not only the file API: sandboxed
 * code in every tier writes the same directory (SECURITY.md item 6).
 */
export abstract class WorkspaceQuota {
  /** Whether workspaces are capped; `reason` says why not. */
  abstract readonly mode: 'loop' | 'off';
  /** Makes `dir` (existing, empty) a capped filesystem of `bytes`; idempotent (re-mounts after a reboot). */
  abstract provision(sessionId: string, dir: string, bytes: number): Promise<void>;
  /** Undoes `provision`: unmounts `dir` and frees its storage. A workspace never provisioned is fine. */
  abstract release(sessionId: string, dir: string): Promise<void>;
  /** Unmounts every workspace under `root`, keeping their data for the next `provision` (engine shutdown). */
  abstract detachAll(root: string): Promise<void>;
}

/** No cap beyond the file API's own accounting (not root, or no loop devices). */
export class NoWorkspaceQuota extends WorkspaceQuota {
  readonly mode = 'off' as const;
  async provision(): Promise<void> {}
  async release(): Promise<void> {}
  async detachAll(): Promise<void> {}
}

/**
 * Each workspace is an ext4 filesystem in a sparse image file, loop-mounted on the workspace directory: writes
 * past the size (or the inode count) fail with ENOSPC inside the sandbox, the host disk only ever holds what was
 * written, and the data survives engine restarts (the image is re-mounted on the next `provision`). mkfs + mount
 * take about 15 ms per session. Needs root, `mkfs.ext4` and loop devices.
 */
export class LoopImageQuota extends WorkspaceQuota {
  readonly mode = 'loop' as const;
  private readonly logger = new Logger('WorkspaceQuota');

  constructor(
    private readonly imageDir: string,
    private readonly owner: { uid: number; gid: number } | null,
  ) {
    super();
  }

  /** Root with `mkfs.ext4` and a loop device: the only setting where this adapter can work. */
  static usable(): { ok: boolean; reason?: string } {
    if (process.getuid?.() !== 0) return { ok: false, reason: 'the engine does not run as root' };
    if (!['/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4'].some((p) => existsSync(p)))
      return { ok: false, reason: 'mkfs.ext4 is not installed (e2fsprogs)' };
    if (!existsSync('/dev/loop-control')) return { ok: false, reason: 'no loop devices (/dev/loop-control)' };
    return { ok: true };
  }

  async provision(sessionId: string, dir: string, bytes: number): Promise<void> {
    if (isMountPoint(dir)) return;
    const image = this.imageOf(sessionId);
    await mkdir(this.imageDir, { recursive: true, mode: 0o700 });
    if (!existsSync(image)) {
      // A workspace made before capping was on keeps its files uncapped rather than hiding them under a mount.
      if ((await readdir(dir)).length > 0) {
        this.logger.warn(`workspace ${sessionId} predates workspace capping and stays uncapped`);
        return;
      }
      const h = await open(image, 'wx', 0o600);
      try {
        // Sparse: costs nothing until written. ext4 needs a few MiB of its own; tinier caps (tests) get the floor,
        // and the file API still holds them to the exact cap.
        await h.truncate(Math.max(bytes, MIN_IMAGE_BYTES));
      } finally {
        await h.close();
      }
      const owner = this.owner ? ['-E', `root_owner=${this.owner.uid}:${this.owner.gid}`] : [];
      // No journal: a workspace is scratch space, and the journal would take its share of the cap.
      await run('mkfs.ext4', ['-q', '-F', '-m', '0', '-O', '^has_journal', ...owner, image]);
    }
    // discard: blocks freed in the workspace are punched out of the sparse image, so the host gets them back.
    await run('mount', ['-o', 'loop,nosuid,nodev,discard', image, dir]);
    // mkfs leaves lost+found; a fresh workspace starts empty.
    await rmdir(path.join(dir, 'lost+found')).catch(() => undefined);
    this.logger.debug(`workspace ${sessionId} capped at ${bytes} bytes (${image})`);
  }

  async release(sessionId: string, dir: string): Promise<void> {
    if (isMountPoint(dir)) {
      // Lazy: a sandbox still holding a file open must not keep the session from ending.
      await run('umount', ['-l', dir]);
    }
    await rm(this.imageOf(sessionId), { force: true });
  }

  async detachAll(root: string): Promise<void> {
    const prefix = `${path.resolve(root)}/`;
    const mounted = mountPoints().filter(
      (m) => m.startsWith(prefix) && !m.slice(prefix.length).includes('/'),
    );
    for (const dir of mounted) await run('umount', ['-l', dir]).catch(() => undefined);
  }

  private imageOf(sessionId: string): string {
    return path.join(this.imageDir, `${sessionId}.img`);
  }
}

/** True when `dir` is the mount point of a mounted filesystem (per /proc/self/mountinfo). */
export function isMountPoint(dir: string): boolean {
  return mountPoints().includes(path.resolve(dir));
}

function mountPoints(): string[] {
  try {
    return readFileSync('/proc/self/mountinfo', 'utf8')
      .split('\n')
      .map((line) => unescapeMount(line.split(' ')[4] ?? ''))
      .filter(Boolean);
  } catch {
    return [];
  }
}

const unescapeMount = (s: string): string =>
  s.replace(/\\([0-7]{3})/g, (_, o: string) => String.fromCharCode(parseInt(o, 8)));
