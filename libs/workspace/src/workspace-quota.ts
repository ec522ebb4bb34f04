import { Logger } from '@nestjs/common';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdir, readdir, readFile, realpath, rename, rm, rmdir, writeFile } from 'node:fs/promises';
import * as path from 'node:path';
import { type ImageFs, type ImageOwner, isBtrfsImage, type LoopHost, type SpareImage } from './loop-host';
import { HelperLoopHost } from './loop-host-helper';
import {
  loopsBackedBy,
  mountNamespacesHolding,
  isMountPoint,
  mountsBelow,
  onOwnFilesystem,
  ownMounts,
  topMountAt,
} from './mount-table';
import { errno } from './fs-errors';
import { WorkspaceImagePool } from './workspace-image-pool';

export { isMountPoint } from './mount-table';

/**
 * Caps a workspace's total size and file count for everything that writes it, not only the file API: sandboxed
 * code in every tier writes the same directory (SECURITY.md item 6).
 */
export abstract class WorkspaceQuota {
  /** Whether workspaces are capped; `reason` says why not. */
  abstract readonly mode: 'loop' | 'off';
  /**
   * Start-up: finishes what a previous engine left (a crash leaves workspaces mounted and removals half done) and
   * prepares the workspaces root. Idempotent; `provision` and `release` wait for it.
   */
  abstract recover(): Promise<void>;
  /** Makes `dir` (existing, empty) a capped filesystem of `bytes`; idempotent (re-mounts after a restart). */
  abstract provision(sessionId: string, dir: string, bytes: number): Promise<void>;
  /**
   * Undoes `provision` for good: unmounts `dir` and removes the directory (both done when this resolves), and frees
   * its storage. Resolves false when the workspace was never capped (no storage of its own): its directory is then
   * the caller's to remove.
   */
  abstract release(sessionId: string, dir: string): Promise<boolean>;
  /** Shutdown: unmounts every workspace, keeping their data for the next `provision`, and stops background work. */
  abstract close(): Promise<void>;
  /** Sessions that have storage of their own (an image), whether or not their workspace is mounted. */
  async sessionIds(): Promise<string[]> {
    return [];
  }
}

/** No cap beyond the file API's own accounting (not root, or no loop devices). */
export class NoWorkspaceQuota extends WorkspaceQuota {
  readonly mode = 'off' as const;
  async recover(): Promise<void> {}
  async provision(): Promise<void> {}
  async release(): Promise<boolean> {
    return false;
  }
  async close(): Promise<void> {}
}

export interface LoopImageQuotaOptions {
  /** The workspaces root: each workspace is mounted on `<root>/<sessionId>`. */
  root: string;
  /** Where the images live (`<imageDir>/<sessionId>.img`), never inside a workspace. */
  imageDir: string;
  /** Size of the images the pool formats ahead: the workspace cap. */
  bytes: number;
  /** Owner of each workspace's root directory (the sandbox uid), or null. */
  owner: ImageOwner;
  /** Formatted images kept ready (`WorkspaceImagePool`); 0 formats each one when its workspace is created. */
  poolSize: number;
  /** Filesystem of new images (existing ones keep theirs). */
  fs: ImageFs;
}

/**
 * Each workspace is an ext4 filesystem in a sparse image file, loop-mounted on the workspace directory: writes
 * past the size (or the inode count) fail with ENOSPC inside the sandbox, the host disk only ever holds what was
 * written, and the data survives engine restarts (the image is mounted again by the next `provision`). Images are
 * formatted and mounted ahead of time (`WorkspaceImagePool`), and mount operations go through a helper process
 * (`HelperLoopHost`), so that creating a workspace costs a rename and a mount move, and removing one a rename, a
 * lazy unmount and an rmdir (one pipe round trip each); the filesystem's teardown and the image's deletion follow in
 * the background. Needs root, `mkfs.ext4` and loop devices.
 *
 * Mount propagation (SECURITY.md item 23): the root is a mount of its own in a peer group of its own. Mounts below
 * it reach no namespace that existed before (services of the host), and a namespace copied from the engine's later
 * (a sandbox being set up, which bubblewrap makes a slave) holds its copies as slaves: when the engine unmounts a
 * workspace, the copies go too, and its loop device is freed. Were the root private, a namespace that outlives its
 * engine (a sandbox stuck before it pivoted away from the host's tree) would keep every workspace mounted when it
 * was made, and their loop devices, for as long as it lives. (Removing a mount point's directory detaches the copies
 * mounted on it in every namespace: that is how the spares' copies go.)
 */
export class LoopImageQuota extends WorkspaceQuota {
  readonly mode = 'loop' as const;
  private readonly logger = new Logger('WorkspaceQuota');
  private readonly pool: WorkspaceImagePool;
  /** Images of removed workspaces, deleted in the background; a crash leaves them for `prepare`. */
  private readonly trash: string;
  private prepared?: Promise<void>;
  /** The root mount this engine made, unmounted at `close`. */
  private boundRoot?: string;
  /** Where spares are mounted: a private mount inside the root, the only place a mount can be moved from. */
  private readonly spareMounts: string;
  /** Names the root mount this engine made (boot and mount id), so that a successor knows it after a crash. */
  private readonly rootMark: string;
  /**
   * Where the top levels of btrfs images are mounted for the engine (`<imageDir>/.roots/<sessionId>`): a mount in a
   * peer group of its own, so that the checkpoint tree tool's jail (a slave copy) sees each as it comes and goes.
   */
  private readonly roots: string;
  /** A private mount where fork copies are mounted to be fixed up before they become workspaces. */
  private readonly forks: string;
  /** Mounts this engine made at `roots` and `forks`, unmounted at `close`. */
  private readonly boundDirs: string[] = [];
  /** Each session's top-level mount, made once (concurrent callers share it). */
  private readonly rootMounts = new Map<string, Promise<string | null>>();

  /**
   * `spareHost` prepares the pool's spares: `WorkspaceModule` gives it a helper process of its own, so that a
   * workspace being made never waits behind a spare's format and mount.
   */
  constructor(
    private readonly options: LoopImageQuotaOptions,
    private readonly host: LoopHost = new HelperLoopHost(),
    private readonly spareHost: LoopHost = host,
  ) {
    super();
    this.trash = path.join(options.imageDir, '.trash');
    this.rootMark = path.join(options.imageDir, '.root-mount');
    this.spareMounts = path.join(options.root, '.spares');
    this.roots = path.join(options.imageDir, '.roots');
    this.forks = path.join(options.imageDir, '.forks');
    this.pool = new WorkspaceImagePool(spareHost, {
      dir: path.join(options.imageDir, '.pool'),
      mounts: this.spareMounts,
      size: options.poolSize,
      bytes: options.bytes,
      owner: options.owner,
      fs: options.fs,
    });
  }

  /** Root with `mkfs.ext4` and a loop device: the only setting where this adapter can work. */
  static usable(): { ok: boolean; reason?: string } {
    if (process.getuid?.() !== 0) return { ok: false, reason: 'the engine does not run as root' };
    if (!['/usr/sbin/mkfs.ext4', '/sbin/mkfs.ext4'].some((p) => existsSync(p)))
      return { ok: false, reason: 'mkfs.ext4 is not installed (e2fsprogs)' };
    if (!existsSync('/dev/loop-control')) return { ok: false, reason: 'no loop devices (/dev/loop-control)' };
    return { ok: true };
  }

  /** Whether images can be btrfs here: btrfs-progs installed and btrfs in the kernel. */
  static btrfsUsable(): { ok: boolean; reason?: string } {
    const tools = ['mkfs.btrfs', 'btrfstune'];
    for (const tool of tools) {
      if (!['/usr/sbin', '/sbin', '/usr/bin', '/bin'].some((d) => existsSync(path.join(d, tool))))
        return { ok: false, reason: `${tool} is not installed (btrfs-progs)` };
    }
    const filesystems = (() => {
      try {
        return readFileSync('/proc/filesystems', 'utf8');
      } catch {
        return '';
      }
    })();
    if (!/\bbtrfs\b/.test(filesystems))
      return { ok: false, reason: 'the kernel has no btrfs (/proc/filesystems)' };
    return { ok: true };
  }

  /** The filesystem new images get. */
  get fs(): ImageFs {
    return this.options.fs;
  }

  /** Where the top levels of btrfs images are mounted (`rootOf`). */
  get rootsDir(): string {
    return this.roots;
  }

  /** Formatted images ready in the pool. */
  get spareImages(): number {
    return this.pool.readyCount;
  }

  recover(): Promise<void> {
    this.prepared ??= this.prepare().catch((err: unknown) => {
      this.prepared = undefined; // the next call tries again
      throw err;
    });
    return this.prepared;
  }

  async provision(sessionId: string, dir: string, bytes: number): Promise<void> {
    await this.recover();
    if (onOwnFilesystem(dir)) return;
    const image = this.imageOf(sessionId);
    if (existsSync(image)) {
      await this.host.mountImage(image, dir);
      return;
    }
    // A workspace made before capping was on keeps its files uncapped rather than hiding them under a mount.
    if (readdirSync(dir).length > 0) {
      this.logger.warn(`workspace ${sessionId} predates workspace capping and stays uncapped`);
      return;
    }
    const spare = this.pool.take(bytes);
    if (spare) await this.takeSpare(spare, image, dir);
    else {
      await this.pool.format(image, bytes);
      await this.host.mountImage(image, dir, { fresh: true });
    }
    this.pool.refill();
    this.logger.debug(`workspace ${sessionId} capped at ${bytes} bytes (${image})`);
  }

  /** A spare made the workspace; should the move fail, its image is mounted there the usual way. */
  private async takeSpare(spare: SpareImage, image: string, dir: string): Promise<void> {
    try {
      await this.host.takeSpare(spare, image, dir);
    } catch (err) {
      if (!existsSync(image)) throw err;
      this.logger.warn(`${(err as Error).message}; mounting ${image} instead`);
      await this.host.mountImage(image, dir);
      await this.host.unmount(spare.mount);
    }
  }

  /**
   * Moves the image to the trash (the point of no return: a crash from here on is finished by the next start-up),
   * detaches the workspace and removes its directory; the filesystem's teardown and the image's deletion follow in
   * the background.
   */
  async release(sessionId: string, dir: string): Promise<boolean> {
    await this.recover();
    await this.unmountRoot(sessionId);
    const trashed = path.join(this.trash, `${sessionId}~${randomBytes(6).toString('hex')}.img`);
    return this.host.removeWorkspace(this.imageOf(sessionId), trashed, dir);
  }

  async close(): Promise<void> {
    const recovering = this.prepared;
    this.prepared = undefined;
    await recovering?.catch(() => undefined);
    await this.pool.close();
    const root = await realpath(this.options.root).catch(() => this.options.root);
    for (const target of mountsBelow(root)) await this.host.unmount(target);
    this.rootMounts.clear();
    for (const dir of this.boundDirs.splice(0)) {
      for (const target of mountsBelow(dir)) await this.host.unmount(target);
      await this.host.unmount(dir);
    }
    if (this.boundRoot) {
      await this.host.unmount(this.boundRoot);
      await rm(this.rootMark, { force: true });
    }
    this.boundRoot = undefined;
    await Promise.all([this.host.close(), this.spareHost.close()]);
  }

  /**
   * What a previous engine left, in order: the workspaces and spares it left mounted are unmounted, which the
   * sandbox namespaces it left behind follow (their copies are slaves, or go with the spares' directories); the root
   * gets a new peer group of its own (a bind onto itself, replacing a crashed engine's; an operator's mount there is
   * kept) and a private mount for the spares; removals are finished; loop devices of this engine's images that
   * nothing mounts any more are detached; the pool mounts its images again. Sessions mount their workspaces again
   * as they are re-created.
   */
  private async prepare(): Promise<void> {
    await Promise.all([this.host.start(), this.spareHost.start()]);
    await mkdir(this.options.root, { recursive: true, mode: 0o711 });
    await mkdir(this.trash, { recursive: true, mode: 0o700 });
    const root = await realpath(this.options.root);
    const leftovers = mountsBelow(root);
    for (const target of leftovers) await this.host.unmount(target);
    if (leftovers.length > 0) this.logger.warn(`unmounted ${leftovers.length} mounts a previous engine left`);
    await this.replaceStaleRootMount(root);
    if (await this.host.ownMount(root, 'shared')) {
      this.boundRoot = root;
      await writeFile(this.rootMark, `${bootId()} ${topMountAt(root)?.id}\n`);
    }
    // Removing a spare's directory also detaches the copies other namespaces hold of what was mounted there.
    await rm(this.spareMounts, { recursive: true, force: true });
    await mkdir(this.spareMounts, { mode: 0o700 });
    await this.host.ownMount(this.spareMounts, 'private');
    await this.prepareRoots();
    for (const name of await readdir(this.trash)) await this.finishRemoval(root, name);
    // Before the pool mounts anything: every loop device of these images is a leftover now.
    await this.detachStrayLoops(await realpath(this.options.imageDir));
    await this.pool.open();
  }

  /**
   * The top-level mounts and fork copies a previous engine left: thawed first (a crash in the middle of a fork
   * leaves its source frozen, and a frozen filesystem stays frozen when mounted again), unmounted, the copies
   * deleted; then `.roots` becomes a mount in a peer group of its own and `.forks` a private one.
   */
  private async prepareRoots(): Promise<void> {
    for (const dir of [this.roots, this.forks]) {
      await mkdir(dir, { recursive: true, mode: 0o700 });
      const real = await realpath(dir);
      const left = mountsBelow(real);
      for (const target of left) await this.host.thaw(target).catch(() => undefined);
      for (const target of left) await this.host.unmount(target);
      if (isMountPoint(real)) await this.host.unmount(real);
      // Never rm -r here: a mount that survived would take its workspace's files with it.
      for (const name of await readdir(real)) await removeEmptyDir(path.join(real, name));
    }
    for (const name of await readdir(this.options.imageDir)) {
      if (name.startsWith('.fork~')) await rm(path.join(this.options.imageDir, name), { force: true });
    }
    for (const [dir, propagation] of [
      [this.roots, 'shared'],
      [this.forks, 'private'],
    ] as const) {
      if (await this.host.ownMount(dir, propagation)) this.boundDirs.push(dir);
    }
  }

  /**
   * The top level of the session's btrfs image (its workspace `ws` and its `checkpoints`), mounted for the engine
   * alone at `<imageDir>/.roots/<sessionId>` on first use and until the workspace is released or the engine stops;
   * null when the workspace is not a btrfs image (ext4, or never capped).
   */
  rootOf(sessionId: string): Promise<string | null> {
    let mounted = this.rootMounts.get(sessionId);
    if (!mounted) {
      mounted = this.mountRootOf(sessionId);
      this.rootMounts.set(sessionId, mounted);
      mounted.catch(() => this.rootMounts.delete(sessionId)); // the next call tries again
    }
    return mounted;
  }

  private async mountRootOf(sessionId: string): Promise<string | null> {
    await this.recover();
    const image = this.imageOf(sessionId);
    if (!existsSync(image) || !(await isBtrfsImage(image))) return null;
    const target = path.join(this.roots, sessionId);
    await mkdir(target, { mode: 0o700 }).catch((err: unknown) => {
      if (errno(err) !== 'EEXIST') throw err;
    });
    if (!isMountPoint(target)) await this.host.mountRoot(image, target);
    return target;
  }

  private async unmountRoot(sessionId: string): Promise<void> {
    const mounted = this.rootMounts.get(sessionId);
    this.rootMounts.delete(sessionId);
    await mounted?.catch(() => undefined);
    const target = path.join(this.roots, sessionId);
    if (isMountPoint(target)) await this.host.unmount(target);
    await removeEmptyDir(target);
  }

  /**
   * Makes the image of `newSessionId` (which must have none) a copy of `sessionId`'s btrfs image, taken while its
   * filesystem is frozen; `fixup` gets the copy's top level mounted (to put the workspace back to a checkpoint and
   * drop the checkpoints) before it becomes the new session's image. The new workspace is mounted by `provision`.
   */
  async copyImage(
    sessionId: string,
    newSessionId: string,
    fixup: (root: string) => Promise<void>,
  ): Promise<void> {
    const root = await this.rootOf(sessionId);
    if (!root) throw new Error(`workspace ${sessionId} is not a btrfs image`);
    const image = this.imageOf(newSessionId);
    if (existsSync(image)) throw new Error(`workspace ${newSessionId} has an image already`);
    const suffix = randomBytes(6).toString('hex');
    // Beside the images (the same filesystem, for the rename), named so that a crash leaves nothing `prepare` keeps.
    const copy = path.join(this.options.imageDir, `.fork~${newSessionId}~${suffix}.img`);
    const scratch = path.join(this.forks, `${newSessionId}~${suffix}`);
    try {
      await this.host.copyImage(this.imageOf(sessionId), root, copy);
      await mkdir(scratch, { mode: 0o700 });
      await this.host.mountRoot(copy, scratch);
      try {
        await fixup(scratch);
      } finally {
        await this.host.unmount(scratch);
        await removeEmptyDir(scratch);
      }
      await rename(copy, image);
    } catch (err) {
      await rm(copy, { force: true });
      throw err;
    }
  }

  /**
   * The root mount a crashed engine made (recognised by the mark it left: same boot, same mount id) is unmounted, so
   * that no mount of a dead engine survives (SECURITY.md item 23); an operator's mount there is left alone.
   */
  private async replaceStaleRootMount(root: string): Promise<void> {
    const mark = await readFile(this.rootMark, 'utf8').catch(() => '');
    const top = topMountAt(root);
    if (top && mark.trim() === `${bootId()} ${top.id}`) await this.host.unmount(root);
    await rm(this.rootMark, { force: true });
  }

  /** A removal a crash interrupted: its directory, unless the session got a new image since, and its image. */
  private async finishRemoval(root: string, trashed: string): Promise<void> {
    const sessionId = trashed.split('~')[0];
    if (sessionId && !existsSync(this.imageOf(sessionId))) await removeEmptyDir(path.join(root, sessionId));
    await rm(path.join(this.trash, trashed), { force: true });
  }

  /** Loop devices of images under `imageDir` that the engine does not mount: a dead engine's, or a deletion's. */
  private async detachStrayLoops(imageDir: string): Promise<void> {
    const stray = () => {
      const mounted = new Set(ownMounts().map((m) => m.device));
      return loopsBackedBy(imageDir).filter((l) => !mounted.has(l.device));
    };
    const found = stray();
    for (const loop of found) await this.host.detachLoop(loop.path).catch(() => undefined);
    if (found.length === 0) return;
    // A loop device still used by a filesystem mounted elsewhere is only marked to go when that lets go.
    const held = stray();
    this.logger.warn(`detached ${found.length - held.length} loop devices a previous engine left`);
    for (const loop of held) {
      const holders = mountNamespacesHolding(loop.device)
        .map((h) => `pid ${h.pid} (${h.command})`)
        .join(', ');
      this.logger.warn(
        `${loop.path} (${loop.backingFile}) stays attached until its other mount namespaces end: ${holders || 'none found'}`,
      );
    }
  }

  override async sessionIds(): Promise<string[]> {
    await this.recover();
    const names = await readdir(this.options.imageDir).catch(() => [] as string[]);
    return names
      .filter((n) => n.endsWith('.img') && !n.startsWith('.'))
      .map((n) => n.slice(0, -'.img'.length));
  }

  private imageOf(sessionId: string): string {
    return path.join(this.options.imageDir, `${sessionId}.img`);
  }
}

/** This boot of the host: a mount id means nothing after a reboot. */
function bootId(): string {
  try {
    return readFileSync('/proc/sys/kernel/random/boot_id', 'utf8').trim();
  } catch {
    return 'unknown-boot';
  }
}

/**
 * rmdir of a workspace's mount point once unmounted. Gone already is fine; files in it (put there while it was not
 * mounted) are not the workspace's, and stay.
 */
async function removeEmptyDir(dir: string): Promise<void> {
  try {
    await rmdir(dir);
  } catch (err) {
    if (errno(err) !== 'ENOENT' && errno(err) !== 'ENOTEMPTY') throw err;
  }
}
