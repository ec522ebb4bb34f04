import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { engineDeadHere } from '../../../core/engine-instance';
import type { ContainerSummary, DockerCallOptions, DockerClient } from '../docker-client';
import { POOLED_LABELS, POOLED_TIER_LABEL } from './container-config';
import type { HostMounts } from './host-mounts';
import type { ResolvedPooledOptions } from './pooled.options';
import type { PooledContainer, PooledContainerFactory } from './pooled-container';

/** A directory under the mount root with no container is swept only once it is this old (one may be starting). */
const STRAY_DIR_AGE_MS = 5 * 60_000;
/** Docker calls made at shutdown wait at most this long: a hung daemon must not hold the engine open. */
const SHUTDOWN_DOCKER_CALL_MS = 5000;
/**
 * A file `<mountRoot>/.engine-<engine id>` says an engine uses the root (one with no container yet has nothing else
 * there): while any is there, no engine unmounts the root at its shutdown. Files of dead engines are swept.
 */
const ROOT_MARKER = '.engine-';

/**
 * Removes what the pooled tier left behind (SECURITY.md #17): containers of dead engines and their mounts at start-up,
 * containers whose destruction failed (Docker gone) once it can, and at shutdown every container of this engine,
 * even one it lost track of.
 */
export class PooledReaper {
  /** Containers whose destruction failed; retried by the reaper and at shutdown. */
  private readonly orphans = new Set<PooledContainer>();
  private reaped?: Promise<void>;

  constructor(
    private readonly options: ResolvedPooledOptions,
    private readonly docker: DockerClient,
    private readonly mounts: HostMounts,
    private readonly factory: PooledContainerFactory,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Marks the mount root as used by this engine, before the root is made a shared mount (see `removeAll`). */
  async markRoot(): Promise<void> {
    await fs.promises.mkdir(this.options.mountRoot, { recursive: true, mode: 0o711 });
    await fs.promises.writeFile(this.rootMarker, '');
  }

  /** A container that could not be destroyed: it is retried later. */
  orphan(container: PooledContainer, err: Error): void {
    this.logger.warn(`container ${container.shortId} could not be destroyed (${err.message}); retried later`);
    this.orphans.add(container);
  }

  /** A container is gone for good (it may have been an orphan). */
  destroyed(container: PooledContainer): void {
    this.orphans.delete(container);
  }

  /** Runs the reaper once per engine life that succeeds; a failure (Docker down) lets a later call try again. */
  reapOnce(): Promise<void> {
    this.reaped ??= this.reap().catch((err: unknown) => {
      this.reaped = undefined;
      this.logger.warn(`pooled reaper could not run: ${(err as Error).message}`);
    });
    return this.reaped;
  }

  /**
   * Shutdown, once nothing else is running: destroys every container still known (a destroy that failed, a start
   * that raced the close), then, if the tier started, any other container labelled with this engine's id, and last
   * the mount root's self-bind, unless another engine still uses the root (its marker, a container's directory).
   */
  async removeAll(started: boolean): Promise<void> {
    const rest = [...this.factory.live.values(), ...this.orphans];
    await Promise.allSettled(rest.map((c) => this.factory.destroy(c)));
    if (!started) return;
    await this.removeUnknownOwnContainers();
    try {
      // An engine marking the root between the release's look and its unmount would lose its shared root: a window of
      // a syscall, during that engine's start.
      await fs.promises.rm(this.rootMarker, { force: true });
      if (await this.mounts.releaseSharedRoot(this.options.mountRoot))
        this.logger.log(`unmounted the pooled mount root ${this.options.mountRoot}`);
    } catch (err) {
      this.logger.warn(`could not unmount ${this.options.mountRoot}: ${(err as Error).message}`);
    }
  }

  /**
   * Removes pooled containers of dead engines (same host, process gone or replaced) and exited ones, then mounts
   * and directories under the mount root that no container uses. Containers of live engines are left alone.
   */
  private async reap(): Promise<void> {
    const found = await this.docker.listByLabel({ [POOLED_LABELS.tier]: POOLED_TIER_LABEL });
    const keep = new Set<string>(this.factory.keys);
    let removed = 0;
    for (const c of found) {
      const key = c.labels[POOLED_LABELS.mountKey];
      const engine = c.labels[POOLED_LABELS.engine] ?? '';
      const dead =
        engine !== this.options.engineId &&
        (engineDeadHere(engine) || c.state === 'exited' || c.state === 'dead');
      if (!dead) {
        if (key) keep.add(key);
        continue;
      }
      await this.removeLeftover(c);
      removed++;
    }
    const root = this.options.mountRoot;
    const keyOf = (p: string) => path.relative(root, p).split(path.sep)[0];
    for (const target of await this.mounts.mountsUnder(root)) {
      if (!keep.has(keyOf(target))) await this.mounts.unmount(target);
    }
    // Compared with file times: wall-clock time.
    const now = this.clock.now().getTime();
    for (const name of await fs.promises.readdir(root).catch(() => [] as string[])) {
      if (name.startsWith(ROOT_MARKER)) {
        const marker = path.join(root, name);
        if (marker !== this.rootMarker && engineDeadHere(name.slice(ROOT_MARKER.length)))
          await fs.promises.rm(marker, { force: true });
        continue;
      }
      // `<key>.egress` and `<key>.relay` hold a container's sockets, never a mount: they go with their key.
      const socketDir = /^[0-9a-f]+\.(egress|relay)$/.test(name);
      const key = socketDir ? name.slice(0, name.indexOf('.')) : name;
      if (keep.has(key) || this.factory.keys.has(key)) continue;
      const dir = path.join(root, name);
      const stat = await fs.promises.lstat(dir).catch(() => undefined);
      if (!stat?.isDirectory() || now - stat.mtimeMs < STRAY_DIR_AGE_MS) continue;
      if (socketDir) await fs.promises.rm(dir, { recursive: true, force: true }).catch(() => undefined);
      else await fs.promises.rmdir(dir).catch(() => undefined); // never recursive: only empty mount points go
    }
    for (const c of [...this.orphans]) {
      await this.factory
        .destroy(c)
        .then(() => this.orphans.delete(c))
        .catch(() => undefined);
    }
    if (removed > 0) this.logger.log(`reaped ${removed} pooled container(s) left by dead engines`);
  }

  private get rootMarker(): string {
    // Default ids are file-name safe already (and stay checkable by `engineDeadHere`); any other id is made so.
    const id = this.options.engineId.replace(/[^A-Za-z0-9_.:-]/g, '_');
    return path.join(this.options.mountRoot, `${ROOT_MARKER}${id}`);
  }

  /**
   * Removes every container still labelled with this engine's id, known or not: one Docker made for a create whose
   * reply was lost (a daemon restart) is known only to Docker.
   */
  private async removeUnknownOwnContainers(): Promise<void> {
    try {
      const call = { timeoutMs: SHUTDOWN_DOCKER_CALL_MS };
      const left = await this.docker.listByLabel(
        { [POOLED_LABELS.tier]: POOLED_TIER_LABEL, [POOLED_LABELS.engine]: this.options.engineId },
        call,
      );
      for (const c of left) {
        await this.removeLeftover(c, call);
      }
      if (left.length > 0)
        this.logger.warn(`removed ${left.length} pooled container(s) the engine had lost track of`);
    } catch (err) {
      this.logger.warn(
        `could not check for this engine's pooled containers at shutdown (the next start reaps them): ${(err as Error).message}`,
      );
    }
  }

  /** Removes a container this engine does not hold, then its mount point (a key of ours is hex, never a path). */
  private async removeLeftover(c: ContainerSummary, call?: DockerCallOptions): Promise<void> {
    await this.docker.remove(c.id, call);
    const key = c.labels[POOLED_LABELS.mountKey];
    if (key && /^[0-9a-f]+$/.test(key)) await this.factory.release(key).catch(() => undefined);
  }
}
