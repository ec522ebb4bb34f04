import { randomBytes } from 'node:crypto';
import { existsSync } from 'node:fs';
import { rename, rm, rmdir } from 'node:fs/promises';
import * as path from 'node:path';
import { HelperUnavailable, JsonLineHelper } from './json-line-helper';
import { LOOP_HELPER_SOURCE } from './loop-host-helper-script';
import { isMountPoint } from './mount-table';
import {
  btrfsMkfsArgs,
  CommandLoopHost,
  debugfsArgs,
  debugfsComplaint,
  type ImageFs,
  imageBytes,
  type ImageOwner,
  mkfsArgs,
  type SpareImage,
} from './loop-host';

const START_TIMEOUT_MS = 10_000;

type Request =
  | { op: 'mount_image'; image: string; target: string; fresh: boolean }
  | { op: 'take_spare'; spare_image: string; spare_mount: string; image: string; target: string }
  | { op: 'remove_workspace'; image: string; trashed: string; target: string }
  | { op: 'umount'; target: string }
  | { op: 'detach'; device: string }
  | {
      op: 'format';
      image: string;
      bytes: number;
      commands: string[][];
      btrfs?: { scratch: string; owner: [number, number] | null };
    }
  | { op: 'mount_root'; image: string; target: string }
  | { op: 'snapshot'; source: string; parent: string; name: string; readonly: boolean }
  | { op: 'delete_subvolume'; parent: string; name: string }
  | { op: 'copy_image'; image: string; root: string; dest: string }
  | { op: 'thaw'; root: string };

interface Reply {
  ok: boolean;
  /** `format`: what each command printed on stderr. */
  stderr?: string[];
  /** Symbolic errno (`EBUSY`, `EINVAL`…) when not ok. */
  errno?: string;
  message?: string;
}

/**
 * `LoopHost` through one long-lived root `python3` that makes the syscalls and runs mkfs.ext4: a workspace mount
 * costs a pipe round trip and about a millisecond of kernel work instead of starting `mount` (10 ms or more), and
 * the engine never forks its large process to format an image (a fork blocks its event loop for milliseconds).
 * Without python3, or while the helper is down, each call falls back to the util-linux command.
 */
export class HelperLoopHost extends CommandLoopHost {
  private readonly helper: JsonLineHelper<Request, Reply>;

  constructor(python = '/usr/bin/python3', requestTimeoutMs = 30_000) {
    super();
    this.helper = new JsonLineHelper({
      name: 'loop helper',
      command: python,
      args: ['-I', '-S', '-c', LOOP_HELPER_SOURCE],
      env: { PATH: '/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8' },
      startTimeoutMs: START_TIMEOUT_MS,
      requestTimeoutMs,
      logger: this.logger,
    });
  }

  override async start(): Promise<void> {
    await this.helper.start();
  }

  override async format(image: string, bytes: number, owner: ImageOwner, fs: ImageFs): Promise<void> {
    const fallback = async () => void (await super.format(image, bytes, owner, fs));
    const size = imageBytes(bytes, fs);
    if (fs === 'btrfs') {
      const scratch = path.join(path.dirname(image), `.init-${randomBytes(6).toString('hex')}`);
      const btrfs = { scratch, owner: owner ? ([owner.uid, owner.gid] as [number, number]) : null };
      const commands = [['mkfs.btrfs', ...btrfsMkfsArgs(image, bytes)]];
      await this.viaHelper({ op: 'format', image, bytes: size, commands, btrfs }, fallback);
      return;
    }
    const commands = [
      ['mkfs.ext4', ...mkfsArgs(image, owner)],
      ['debugfs', ...debugfsArgs(image)],
    ];
    const reply = await this.viaHelper({ op: 'format', image, bytes: size, commands }, fallback);
    const complaint = debugfsComplaint(reply?.stderr?.[1] ?? '');
    if (complaint) {
      await rm(image, { force: true });
      throw new Error(`debugfs ${debugfsArgs(image).join(' ')} failed: ${complaint}`);
    }
  }

  override async mountImage(image: string, target: string, opts: { fresh?: boolean } = {}): Promise<void> {
    const request = { op: 'mount_image' as const, image, target, fresh: opts.fresh === true };
    await this.viaHelper(request, async () => {
      // A helper that died mid-call may have mounted already: the command must not stack a second mount.
      if (!isMountPoint(target)) await super.mountImage(image, target);
      return undefined;
    });
  }

  override async mountRoot(image: string, target: string): Promise<void> {
    await this.viaHelper({ op: 'mount_root', image, target }, async () => {
      if (!isMountPoint(target)) await super.mountRoot(image, target);
      return undefined;
    });
  }

  override async snapshot(
    source: string,
    parent: string,
    name: string,
    opts: { writable?: boolean } = {},
  ): Promise<void> {
    const request = { op: 'snapshot' as const, source, parent, name, readonly: opts.writable !== true };
    await this.viaHelper(request, async () => void (await super.snapshot(source, parent, name, opts)));
  }

  override async deleteSubvolume(parent: string, name: string): Promise<void> {
    const fallback = async () => void (await super.deleteSubvolume(parent, name));
    await this.viaHelper({ op: 'delete_subvolume', parent, name }, fallback);
  }

  override async copyImage(image: string, root: string, dest: string): Promise<void> {
    const fallback = async () => void (await super.copyImage(image, root, dest));
    await this.viaHelper({ op: 'copy_image', image, root, dest }, fallback);
  }

  override async thaw(root: string): Promise<void> {
    await this.viaHelper({ op: 'thaw', root }, async () => void (await super.thaw(root)), ['ENOENT']);
  }

  override async takeSpare(spare: SpareImage, image: string, target: string): Promise<void> {
    const request = {
      op: 'take_spare' as const,
      spare_image: spare.image,
      spare_mount: spare.mount,
      image,
      target,
    };
    await this.viaHelper(request, async () => {
      // A helper that died mid-call may have done part of it: nothing is done twice.
      if (existsSync(spare.image)) await rename(spare.image, image);
      if (!isMountPoint(target)) await this.exec('mount', ['--move', '--', spare.mount, target]);
      await rmdir(spare.mount).catch(() => undefined);
      return undefined;
    });
  }

  override async removeWorkspace(image: string, trashed: string, target: string): Promise<boolean> {
    let removed = true;
    const request = { op: 'remove_workspace' as const, image, trashed, target };
    const reply = await this.viaHelper(request, async () => {
      removed = await super.removeWorkspace(image, trashed, target);
      return undefined;
    }, ['ENOENT']);
    return removed && reply?.ok !== false;
  }

  override async unmount(target: string): Promise<void> {
    const fallback = async () => void (await super.unmount(target));
    await this.viaHelper({ op: 'umount', target }, fallback, ['EINVAL', 'ENOENT']);
  }

  override async detachLoop(device: string): Promise<void> {
    const fallback = async () => void (await super.detachLoop(device));
    await this.viaHelper({ op: 'detach', device }, fallback, ['ENXIO', 'ENOENT']);
  }

  override close(): Promise<void> {
    this.helper.close();
    return Promise.resolve();
  }

  /**
   * Sends `request` to the helper and resolves with its reply; an errno in `fine` counts as success (not mounted,
   * not attached). When the helper cannot answer, `fallback` does the same with a command (no reply then).
   */
  private async viaHelper(
    request: Request,
    fallback: () => Promise<undefined>,
    fine: string[] = [],
  ): Promise<Reply | undefined> {
    let reply: Reply;
    try {
      reply = await this.helper.call(request);
    } catch (err) {
      if (!(err instanceof HelperUnavailable)) throw err;
      if (!this.helper.gone) this.logger.warn(`${err.message}; using the command instead`);
      return fallback();
    }
    if (reply.ok || (reply.errno !== undefined && fine.includes(reply.errno))) return reply;
    const subject =
      request.op === 'snapshot'
        ? `${request.source} as ${path.join(request.parent, request.name)}`
        : 'target' in request
          ? request.target
          : 'image' in request
            ? request.image
            : 'root' in request
              ? request.root
              : 'parent' in request
                ? path.join(request.parent, request.name)
                : request.device;
    throw new Error(`${request.op} ${subject} failed: ${reply.errno ?? ''} ${reply.message ?? ''}`.trim());
  }
}
