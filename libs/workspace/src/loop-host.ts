import { existsSync } from 'node:fs';
import { chmod, chown, mkdir, mkdtemp, open, rename, rm, rmdir } from 'node:fs/promises';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { runCommand } from '@switchyard/common';
import { isMountPoint } from './mount-table';
import { errno } from './fs-errors';

const COMMAND_TIMEOUT_MS = 30_000;
/**
 * ext4 needs a few MiB of its own, btrfs (mixed block groups) 16; tinier caps (tests) get this floor, and the file
 * API holds them to the cap.
 */
export const MIN_IMAGE_BYTES = { ext4: 8 * 2 ** 20, btrfs: 16 * 2 ** 20 } as const;
/** Below this a btrfs image mixes data and metadata in one pool (what btrfs advises for small filesystems). */
const BTRFS_MIXED_BELOW = 4 * 2 ** 30;
/** Where a btrfs image's superblock says what it is. */
const BTRFS_MAGIC_OFFSET = 0x10040;
const BTRFS_MAGIC = Buffer.from('_BHRfS_M');

/**
 * The filesystem of a workspace image. `btrfs`: the workspace is the subvolume `ws` and checkpoints are read-only
 * snapshots beside it (`checkpoints/<id>`), at the image's top level, which only the engine mounts. `ext4`: the
 * image's root is the workspace.
 */
export type ImageFs = 'btrfs' | 'ext4';

/** Owner of a fresh workspace's root directory (the sandbox uid), or null to keep root's. */
export type ImageOwner = { uid: number; gid: number } | null;

/** A formatted image mounted ahead of time, waiting for a workspace (`WorkspaceImagePool`). */
export interface SpareImage {
  image: string;
  /** Where it is mounted: a directory of its own under a private mount (a mount can only be moved from there). */
  mount: string;
}

/**
 * The host operations behind loop-mounted workspaces: formatting images, loop mounts, propagation, loop devices.
 * Needs root. Every method rejects with an `Error` naming the operation and the path.
 */
export abstract class LoopHost {
  /**
   * Creates `image` (must not exist) as a sparse filesystem of `bytes` whose workspace belongs to `owner` and is
   * empty. ext4: mkfs's lost+found removed, so that mounting it needs no write. btrfs: the subvolume `ws` and the
   * directory `checkpoints` (root's, 0700) at the top level.
   */
  abstract format(image: string, bytes: number, owner: ImageOwner, fs: ImageFs): Promise<void>;
  /**
   * Mounts the workspace of `image` on `target` (nosuid, nodev, discard) through a loop device: the one the image is
   * still attached to, if any (mounting it through a second device would corrupt it), else a free one. `fresh`: the
   * image was never attached, so no such device is looked for. The device is detached by the kernel once the
   * filesystem is unmounted everywhere. The workspace is the image's root (ext4) or its subvolume `ws` (btrfs).
   */
  abstract mountImage(image: string, target: string, opts?: { fresh?: boolean }): Promise<void>;
  /**
   * Mounts the top level of the btrfs `image` (its workspace subvolume and its checkpoints) on `target`, through
   * the loop device its workspace mount holds: one filesystem, two mounts.
   */
  abstract mountRoot(image: string, target: string): Promise<void>;
  /** Snapshots the btrfs subvolume `source` as `<parent>/<name>`: read-only unless `writable`. */
  abstract snapshot(
    source: string,
    parent: string,
    name: string,
    opts?: { writable?: boolean },
  ): Promise<void>;
  /** Deletes the btrfs subvolume `<parent>/<name>` and everything in it. */
  abstract deleteSubvolume(parent: string, name: string): Promise<void>;
  /**
   * Copies the btrfs `image` to `dest` (must not exist; sparse) while the filesystem mounted at `root` is frozen
   * (writers wait; everything written is in the image), then gives the copy a filesystem id of its own so that
   * both can be mounted at once.
   */
  abstract copyImage(image: string, root: string, dest: string): Promise<void>;
  /** Thaws the filesystem mounted at `root` should a copy have left it frozen (a crash); fine when it is not. */
  abstract thaw(root: string): Promise<void>;
  /**
   * Makes a spare a workspace: renames its image to `image`, moves its mount onto `target` and removes the
   * directory it was mounted on (which also detaches copies of it that other mount namespaces made).
   */
  abstract takeSpare(spare: SpareImage, image: string, target: string): Promise<void>;
  /**
   * Removes a workspace for good: moves `image` to `trashed` (the point of no return; false when there is no
   * image, i.e. the workspace was never capped, and nothing else is done), detaches the filesystem mounted on
   * `target` (lazily: a sandbox still using it keeps it until it lets go) and removes that directory. The
   * filesystem's teardown and the image's deletion may follow in the background; a crash leaves the image in the
   * trash.
   */
  abstract removeWorkspace(image: string, trashed: string, target: string): Promise<boolean>;
  /** Detaches whatever is mounted on `target` now (lazily: a sandbox still using it keeps it until it lets go). */
  abstract unmount(target: string): Promise<void>;
  /** Detaches a loop device; the kernel defers it while a filesystem on it is still mounted somewhere. */
  abstract detachLoop(device: string): Promise<void>;
  /**
   * Makes `dir` a mount point (a bind onto itself unless it is one already) with the given propagation: `shared`
   * in a new peer group (mounts below it reach only mount namespaces copied from the engine's afterwards, as
   * slaves), or `private`. True when it made the bind.
   */
  abstract ownMount(dir: string, propagation: 'shared' | 'private'): Promise<boolean>;
  /** Starts what makes later calls fast (a helper process), so that the first workspace does not wait for it. */
  start(): Promise<void> {
    return Promise.resolve();
  }

  /** Releases what the adapter holds (a helper process); later calls still work. */
  close(): Promise<void> {
    return Promise.resolve();
  }
}

/** `LoopHost` through util-linux commands (`mkfs.ext4`, `mount`, `umount`, `losetup`): each call starts one. */
export class CommandLoopHost extends LoopHost {
  protected readonly logger = new Logger('LoopHost');

  async format(image: string, bytes: number, owner: ImageOwner, fs: ImageFs): Promise<void> {
    const h = await open(image, 'wx', 0o600);
    try {
      // Sparse: costs nothing until written.
      await h.truncate(imageBytes(bytes, fs));
    } finally {
      await h.close();
    }
    try {
      if (fs === 'btrfs') {
        await this.exec('mkfs.btrfs', btrfsMkfsArgs(image, bytes));
        await this.initBtrfs(image, owner);
        return;
      }
      await this.exec('mkfs.ext4', mkfsArgs(image, owner));
      // debugfs reports a failed request on stderr and exits 0.
      const complaint = debugfsComplaint(await this.exec('debugfs', debugfsArgs(image)));
      if (complaint) throw new Error(`debugfs ${debugfsArgs(image).join(' ')} failed: ${complaint}`);
    } catch (err) {
      await rm(image, { force: true });
      throw err;
    }
  }

  async mountImage(image: string, target: string): Promise<void> {
    // util-linux reuses the loop device the image is attached to, if any.
    const options = (await isBtrfsImage(image)) ? BTRFS_WORKSPACE_OPTIONS : 'discard';
    await this.exec('mount', ['-o', `loop,nosuid,nodev,${options}`, '--', image, target]);
  }

  async mountRoot(image: string, target: string): Promise<void> {
    await this.exec('mount', ['-o', `loop,nosuid,nodev,${BTRFS_ROOT_OPTIONS}`, '--', image, target]);
  }

  async snapshot(
    source: string,
    parent: string,
    name: string,
    opts: { writable?: boolean } = {},
  ): Promise<void> {
    const readonly = opts.writable ? [] : ['-r'];
    await this.exec('btrfs', [
      '-q',
      'subvolume',
      'snapshot',
      ...readonly,
      '--',
      source,
      path.join(parent, name),
    ]);
  }

  async deleteSubvolume(parent: string, name: string): Promise<void> {
    await this.exec('btrfs', ['-q', 'subvolume', 'delete', '--', path.join(parent, name)]);
  }

  async copyImage(image: string, root: string, dest: string): Promise<void> {
    await this.exec('fsfreeze', ['--freeze', root]);
    try {
      await this.exec('cp', ['--sparse=always', '--no-preserve=all', '--', image, dest]);
    } finally {
      await this.exec('fsfreeze', ['--unfreeze', root]);
    }
    await this.exec('btrfstune', ['-m', dest]).catch(async (err: unknown) => {
      await rm(dest, { force: true });
      throw err;
    });
  }

  async thaw(root: string): Promise<void> {
    await this.exec('fsfreeze', ['--unfreeze', root]).catch(() => undefined); // not frozen: EINVAL
  }

  async takeSpare(spare: SpareImage, image: string, target: string): Promise<void> {
    await rename(spare.image, image);
    await this.exec('mount', ['--move', '--', spare.mount, target]);
    await rmdir(spare.mount);
  }

  async removeWorkspace(image: string, trashed: string, target: string): Promise<boolean> {
    try {
      await rename(image, trashed);
    } catch (err) {
      if (errno(err) !== 'ENOENT') throw err;
      // Not moved now: never capped, or moved already by a helper that died before it could answer.
      if (!existsSync(trashed)) return false;
    }
    await this.unmount(target);
    await rmdir(target).catch((err: unknown) => {
      if (errno(err) !== 'ENOENT' && errno(err) !== 'ENOTEMPTY') throw err; // files put there while unmounted stay
    });
    await rm(trashed, { force: true });
    return true;
  }

  async unmount(target: string): Promise<void> {
    if (!isMountPoint(target)) return;
    await this.exec('umount', ['-l', '--', target]);
  }

  async detachLoop(device: string): Promise<void> {
    await this.exec('losetup', ['-d', device]);
  }

  async ownMount(dir: string, propagation: 'shared' | 'private'): Promise<boolean> {
    const bind = !isMountPoint(dir);
    if (bind) await this.exec('mount', ['--bind', '--', dir, dir]);
    // Private first: a bind inherits the peer group of the mount it was taken from (on most hosts `/`, shared
    // with every service's namespace); shared again, it starts a group of its own.
    await this.exec('mount', ['--make-private', '--', dir]);
    if (propagation === 'shared') await this.exec('mount', ['--make-shared', '--', dir]);
    return bind;
  }

  /** The workspace subvolume (owned by `owner`) and the engine's checkpoints directory, through a scratch mount. */
  private async initBtrfs(image: string, owner: ImageOwner): Promise<void> {
    const scratch = await mkdtemp(path.join(path.dirname(image), '.init-'));
    try {
      await this.exec('mount', ['-o', 'loop', '--', image, scratch]);
      try {
        await this.exec('btrfs', ['-q', 'subvolume', 'create', '--', path.join(scratch, 'ws')]);
        if (owner) await chown(path.join(scratch, 'ws'), owner.uid, owner.gid);
        await chmod(path.join(scratch, 'ws'), 0o755);
        await mkdir(path.join(scratch, 'checkpoints'), 0o700);
      } finally {
        await this.exec('umount', ['--', scratch]);
      }
    } finally {
      await rmdir(scratch);
    }
  }

  /** Runs `command`; resolves with its stderr, rejects naming the command when it fails. */
  protected async exec(command: string, args: string[]): Promise<string> {
    try {
      const env = { PATH: '/usr/sbin:/usr/bin:/sbin:/bin' };
      return (await runCommand(command, args, { timeoutMs: COMMAND_TIMEOUT_MS, env })).stderr;
    } catch (err) {
      const e = err as Error & { stderr?: string };
      throw new Error(`${command} ${args.join(' ')} failed: ${(e.stderr ?? '').trim() || e.message}`, {
        cause: err,
      });
    }
  }
}

/**
 * mount(8) options of a btrfs image's workspace, and of its top level. `discard` is synchronous (at each commit), as
 * for ext4 images: what a sandbox deletes goes back to the host's disk at once. With `discard=async` btrfs kept
 * freed extents for minutes or for good (tried: a deleted 50 MB file still held its blocks in the image after
 * 3 minutes, until an fstrim).
 */
export const BTRFS_WORKSPACE_OPTIONS = 'subvol=ws,discard';
export const BTRFS_ROOT_OPTIONS = 'subvolid=5,discard';

/** What the image file is truncated to: the cap, or the filesystem's floor. */
export function imageBytes(bytes: number, fs: ImageFs): number {
  return Math.max(bytes, MIN_IMAGE_BYTES[fs]);
}

/**
 * mkfs.btrfs arguments. Single copies of data and metadata (a duplicate on the same loop file protects nothing and
 * would take its share of the cap); small images mix data and metadata so that neither runs out before the cap.
 */
export function btrfsMkfsArgs(image: string, bytes: number): string[] {
  const mixed = bytes < BTRFS_MIXED_BELOW ? ['--mixed'] : ['-m', 'single'];
  return ['-q', '-f', ...mixed, '-d', 'single', path.resolve(image)];
}

/** Whether `image` holds a btrfs filesystem (its superblock's magic). */
export async function isBtrfsImage(image: string): Promise<boolean> {
  const h = await open(image, 'r');
  try {
    const magic = Buffer.alloc(BTRFS_MAGIC.length);
    const { bytesRead } = await h.read(magic, 0, magic.length, BTRFS_MAGIC_OFFSET);
    return bytesRead === magic.length && magic.equals(BTRFS_MAGIC);
  } finally {
    await h.close();
  }
}

/**
 * mkfs.ext4 arguments. No journal: a workspace is scratch space, and the journal would take its share of the cap.
 * No reserved blocks: the sandbox uid gets the whole cap.
 */
export function mkfsArgs(image: string, owner: ImageOwner): string[] {
  const rootOwner = owner ? ['-E', `root_owner=${owner.uid}:${owner.gid}`] : [];
  return ['-q', '-F', '-m', '0', '-O', '^has_journal', ...rootOwner, path.resolve(image)];
}

/** debugfs arguments removing mkfs's lost+found (e2fsck makes one again should it ever need it). */
export function debugfsArgs(image: string): string[] {
  return ['-w', '-R', 'rmdir lost+found', path.resolve(image)];
}

/** What debugfs printed on stderr beyond its version banner: a request that failed. */
export function debugfsComplaint(stderr: string): string {
  return stderr
    .split('\n')
    .filter((l) => l.trim() && !/^debugfs \d/.test(l))
    .join('; ');
}
