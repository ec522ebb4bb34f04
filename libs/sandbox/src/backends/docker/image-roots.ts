import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { Logger } from '@nestjs/common';
import { readImageTag } from '../../core/sandbox-image';
import { SystemRoot, type SystemRootAnswer } from '../../core/system-root.port';
import type { DockerClient } from './docker-client';

export interface ImageRootsOptions {
  /** Where the roots live, one directory per image id (e.g. `<data dir>/rootfs`). */
  dir: string;
  /** The default image, when fixed; otherwise the tag in `imageTagFile`. */
  image?: string;
  /** The file `npm run sandbox:image` writes the default image's tag to; re-read at each check. */
  imageTagFile?: string;
  /** How long an image reference's id (and a missing image) is trusted before Docker is asked again. Default 10 s. */
  recheckMs?: number;
  /** The `tar` that extracts the export. Default `tar` on the engine's PATH. */
  tarPath?: string;
}

const DEFAULT_RECHECK_MS = 10_000;
/** A half-made root older than this belongs to an engine that died while exporting. */
const STALE_TEMP_MS = 60 * 60 * 1000;
const TEMP_PREFIX = '.tmp-';
const EXPORT_TIMEOUT_MS = 10 * 60 * 1000;
/** An image check (inspect) waits no longer: a run without a root waits for it. */
const CHECK_TIMEOUT_MS = 5000;

/**
 * The root filesystems of sandbox images as directories, for the subprocess tier: `docker create` + `docker export`
 * streamed into `tar`, into a temporary directory renamed to `<dir>/<image id>` once complete, so a root is either
 * whole or absent and two engines exporting the same image both end with one. Cached by image id (a rebuilt tag gets
 * a new root); roots of images Docker no longer has, and half-made ones of dead engines, are removed once per
 * process, after the first root is ready (never a root still in Docker: another engine may be running it).
 */
export class ImageRoots extends SystemRoot {
  private readonly logger = new Logger(ImageRoots.name);
  private readonly recheckMs: number;
  /** Last answer per image reference and when it was got. */
  private readonly known = new Map<string, { answer: SystemRootAnswer; at: number }>();
  /** Exports under way, by image id. */
  private readonly making = new Map<string, Promise<string>>();
  /** Checks under way, by image reference. */
  private readonly checking = new Map<string, Promise<SystemRootAnswer>>();
  private pruned?: Promise<void>;

  constructor(
    private readonly docker: DockerClient,
    private readonly options: ImageRootsOptions,
    private readonly now: () => number = Date.now,
  ) {
    super();
    this.recheckMs = options.recheckMs ?? DEFAULT_RECHECK_MS;
  }

  async root(image?: string): Promise<SystemRootAnswer> {
    const ref = image ?? this.defaultImage();
    if (ref === undefined) {
      return {
        problem: 'no sandbox image is configured or built yet (build it with `npm run sandbox:image`)',
      };
    }
    const cached = this.known.get(ref);
    if (cached && this.now() - cached.at < this.recheckMs) return cached.answer;
    // A root in hand keeps serving while Docker is asked again: no run waits for Docker once a root exists.
    if (cached?.answer.dir !== undefined) {
      void this.check(ref);
      return cached.answer;
    }
    return this.check(ref);
  }

  /** Waits for checks under way and the pruning started by the first root (tests, shutdown). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.checking.values());
    await this.pruned;
  }

  private check(ref: string): Promise<SystemRootAnswer> {
    let checking = this.checking.get(ref);
    if (!checking) {
      checking = this.answer(ref).finally(() => this.checking.delete(ref));
      this.checking.set(ref, checking);
    }
    return checking;
  }

  private async answer(ref: string): Promise<SystemRootAnswer> {
    const cached = this.known.get(ref);
    let answer: SystemRootAnswer;
    try {
      const id = await this.docker.imageId(ref, { timeoutMs: CHECK_TIMEOUT_MS });
      answer =
        id === undefined
          ? { image: ref, problem: `image ${ref} is not in the Docker engine (${this.docker.endpoint})` }
          : { image: ref, imageId: id, dir: await this.extracted(ref, id) };
    } catch (err) {
      // Docker stopped answering: a root made before is still whole on disk and still this reference's.
      if (cached?.answer.dir !== undefined && fs.existsSync(cached.answer.dir)) {
        this.known.set(ref, { answer: cached.answer, at: this.now() });
        return cached.answer;
      }
      answer = { image: ref, problem: `cannot export the root of ${ref}: ${(err as Error).message}` };
    }
    this.known.set(ref, { answer, at: this.now() });
    if (answer.dir !== undefined) this.pruned ??= this.prune();
    return answer;
  }

  private defaultImage(): string | undefined {
    if (this.options.image) return this.options.image;
    return this.options.imageTagFile === undefined ? undefined : readImageTag(this.options.imageTagFile);
  }

  private extracted(ref: string, id: string): Promise<string> {
    const dir = path.join(this.options.dir, dirName(id));
    if (fs.existsSync(dir)) return Promise.resolve(dir);
    let making = this.making.get(id);
    if (!making) {
      making = this.export(ref, id, dir).finally(() => this.making.delete(id));
      this.making.set(id, making);
    }
    return making;
  }

  private async export(ref: string, id: string, dir: string): Promise<string> {
    const started = this.now();
    fs.mkdirSync(this.options.dir, { recursive: true, mode: 0o755 });
    const temp = path.join(
      this.options.dir,
      `${TEMP_PREFIX}${dirName(id).slice(0, 12)}-${process.pid}-${randomBytes(4).toString('hex')}`,
    );
    fs.mkdirSync(temp, { mode: 0o755 });
    let container: string | undefined;
    try {
      // Created, never started: the export is the image's filesystem as is. The command only has to exist.
      container = await this.docker.createContainer({
        Image: id,
        Entrypoint: [],
        Cmd: ['/nonexistent'],
        NetworkDisabled: true,
        Labels: { 'dev.switchyard.rootfs-export': ref },
      });
      const tar = await this.docker.exportContainer(container, { timeoutMs: EXPORT_TIMEOUT_MS });
      await untar(tar, temp, this.options.tarPath ?? 'tar');
      // bubblewrap, as the sandbox user, must traverse the root.
      fs.chmodSync(temp, 0o755);
      try {
        fs.renameSync(temp, dir);
      } catch (err) {
        // Another engine renamed its copy first: theirs is as good as ours.
        if (!fs.existsSync(dir)) throw err;
        fs.rmSync(temp, { recursive: true, force: true });
      }
      this.logger.log(
        `root of ${ref} (${dirName(id).slice(0, 12)}) ready in ${this.now() - started} ms: ${dir}`,
      );
      return dir;
    } catch (err) {
      fs.rmSync(temp, { recursive: true, force: true });
      throw err;
    } finally {
      if (container !== undefined) {
        await this.docker
          .remove(container)
          .catch((e: Error) =>
            this.logger.warn(`export container ${container} was not removed: ${e.message}`),
          );
      }
    }
  }

  /** A root this process handed out: its sandboxes may still run on it. */
  private inUse(dir: string): boolean {
    return [...this.known.values()].some(({ answer }) => answer.dir === dir);
  }

  /** Removes roots of images Docker no longer has and half-made roots of dead engines. Never throws. */
  private async prune(): Promise<void> {
    try {
      const entries = await fs.promises.readdir(this.options.dir);
      for (const name of entries) {
        const full = path.join(this.options.dir, name);
        if (name.startsWith(TEMP_PREFIX)) {
          const st = await fs.promises.stat(full).catch(() => undefined);
          if (st && this.now() - st.mtimeMs > STALE_TEMP_MS)
            await fs.promises.rm(full, { recursive: true, force: true });
          continue;
        }
        if (!/^[0-9a-f]{64}$/.test(name) || this.inUse(full)) continue;
        if ((await this.docker.imageId(`sha256:${name}`)) !== undefined) continue;
        this.logger.log(`removing the root of image ${name.slice(0, 12)}, gone from Docker`);
        await fs.promises.rm(full, { recursive: true, force: true });
      }
    } catch (err) {
      this.logger.warn(`could not prune old image roots in ${this.options.dir}: ${(err as Error).message}`);
    }
  }
}

/** `sha256:<hex>` → `<hex>`: one directory name per image content. */
function dirName(id: string): string {
  return id.replace(/^sha256:/, '');
}

/**
 * Extracts a `docker export` stream into `dir`. Device nodes are skipped (the sandbox gets its own /dev, and an
 * unprivileged engine could not make them); owners become the engine's (the sandbox sees the root read-only).
 */
function untar(stream: Readable, dir: string, tarPath: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const tar = spawn(tarPath, ['-x', '-p', '--no-same-owner', '--exclude=dev/*', '-f', '-', '-C', dir], {
      stdio: ['pipe', 'ignore', 'pipe'],
    });
    let stderr = '';
    tar.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-2000)));
    tar.stdin.on('error', () => undefined); // EPIPE when tar failed early: its exit says why
    stream.on('error', (err) => {
      tar.kill('SIGKILL');
      reject(new Error(`the export stream failed: ${err.message}`));
    });
    tar.on('error', (err) => reject(new Error(`cannot run ${tarPath}: ${err.message}`)));
    tar.on('close', (code, signal) => {
      if (code === 0) resolve();
      else reject(new Error(`${tarPath} exited with ${code ?? signal}: ${stderr.trim().slice(-500)}`));
    });
    stream.pipe(tar.stdin);
  });
}
