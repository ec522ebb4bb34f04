import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { type Clock, systemClock } from '@switchyard/common';
import { SANDBOX_UID } from '../../../core/sandbox-image';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../../../core/sandbox.errors';
import { buildContainerConfig, egressDirOf, RELAY_SOCKET_NAME, relayDirOf } from './container-config';
import type { HostMounts } from './host-mounts';
import type { DockerClient } from '../docker-client';
import { SandboxHostsFile } from '../sandbox-hosts';
import type { ResolvedPooledOptions } from './pooled.options';
import { RunnerConnection } from '../../../core/runner/runner-connection';
import { type RunnerHello } from '../../../core/runner/runner-protocol';
import { RunnerTimeoutError } from '../../../core/runner/runner.errors';

const STDERR_TAIL_BYTES = 2048;

export type PooledContainerState = 'warm' | 'claimed' | 'destroyed';

/** A started container whose runner answered, first warm in the pool, then owned by exactly one session. */
export class PooledContainer {
  state: PooledContainerState = 'warm';
  sessionId?: string;
  /** Real path of the session workspace mounted at /workspace. */
  workspace?: string;
  /** Set while it is being destroyed; shared by every caller. */
  destroying?: Promise<void>;

  constructor(
    readonly id: string,
    /** Its directory name under the mount root (also a label). */
    readonly mountKey: string,
    /** Host directory bind-mounted at /workspace; the session workspace is bind-mounted onto it at claim. */
    readonly mountPoint: string,
    readonly connection: RunnerConnection,
    readonly hello: RunnerHello,
    private readonly stderrTail: () => string,
    /** When it became ready (`clock.monotonic()`): a claim that began later found it warm. */
    readonly readyAt: number,
  ) {}

  get shortId(): string {
    return this.id.slice(0, 12);
  }

  /** Host path of the runner's relay socket, when it listens on one (see `RELAY_TARGET`). */
  get relaySocket(): string | undefined {
    return this.hello.relay === true ? path.join(relayDirOf(this.mountPoint), RELAY_SOCKET_NAME) : undefined;
  }

  /** Usable: not destroyed and its runner connection open. */
  get alive(): boolean {
    return this.state !== 'destroyed' && !this.connection.isClosed;
  }

  /** The runner's last diagnostics, for error messages and logs. */
  diagnostics(): string {
    return this.stderrTail().trim();
  }
}

/**
 * Creates, checks and destroys pooled containers. A container counts as created only once its runner has greeted
 * the engine and passed one health check; any failure on the way removes what was made.
 */
export class PooledContainerFactory {
  private readonly logger = new Logger('PooledContainerFactory');
  /** Every container this engine made and has not finished destroying, by id. */
  readonly live = new Map<string, PooledContainer>();
  /** Mount keys in use or being set up, which a reaper sweep must leave alone. */
  readonly keys = new Set<string>();

  /** The containers' /etc/hosts, written once on first use. */
  private readonly hosts: SandboxHostsFile;

  constructor(
    private readonly options: ResolvedPooledOptions,
    private readonly docker: DockerClient,
    private readonly mounts: HostMounts,
    private readonly clock: Clock = systemClock,
  ) {
    this.hosts = new SandboxHostsFile(options.hostsDir);
  }

  /** Removes the hosts file's private directory (when no `hostsDir` was given); at shutdown, after the containers. */
  closeHosts(): void {
    this.hosts.close();
  }

  /** Starts in flight; shutdown waits for them so a container created during it is still removed. */
  readonly creating = new Set<Promise<unknown>>();

  /** A started, checked container of `image` (default: the tier's image). */
  create(image: string | undefined = this.options.image): Promise<PooledContainer> {
    const started = this.createOne(image);
    const tracked = started.catch(() => undefined);
    this.creating.add(tracked);
    void tracked.finally(() => this.creating.delete(tracked));
    return started;
  }

  private async createOne(image: string | undefined): Promise<PooledContainer> {
    if (!image) throw new SandboxUnavailableError('no sandbox image configured for the pooled tier');
    const mountKey = randomBytes(6).toString('hex');
    const mountPoint = path.join(this.options.mountRoot, mountKey);
    this.keys.add(mountKey);
    let id: string | undefined;
    let connection: RunnerConnection | undefined;
    let stderr = '';
    try {
      // Root-owned and empty: before a claim, /workspace is a directory the sandbox user cannot write.
      await fs.promises.mkdir(mountPoint, { mode: 0o755 });
      await fs.promises.mkdir(egressDirOf(mountPoint), { mode: 0o755 });
      await makeRelayDir(relayDirOf(mountPoint));
      id = await this.docker.createContainer(
        buildContainerConfig({
          image,
          name: `switchyard-pooled-${mountKey}`,
          engineId: this.options.engineId,
          mountKey,
          mountPoint,
          limits: this.options.limits,
          readOnlyBinds: this.options.readOnlyBinds,
          hostsFile: this.hosts.path(),
        }),
      );
      const stdio = await this.docker.attach(id);
      stdio.stderr.on('data', (chunk: Buffer) => {
        stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
      });
      connection = new RunnerConnection({ ...stdio, close: () => stdio.destroy() });
      await this.docker.start(id);
      const hello = await withTimeout(
        connection.hello,
        this.options.startTimeoutMs,
        `the runner did not greet within ${this.options.startTimeoutMs} ms (pooled.startTimeoutMs)`,
      );
      await connection.ping(this.options.healthCheckTimeoutMs);
      const container = new PooledContainer(
        id,
        mountKey,
        mountPoint,
        connection,
        hello,
        () => stderr,
        this.clock.monotonic(),
      );
      this.live.set(id, container);
      this.logger.debug(`warm container ${container.shortId} ready (runner pid ${hello.pid})`);
      return container;
    } catch (err) {
      connection?.close();
      if (id)
        await this.docker.remove(id).catch((e: Error) => this.logger.warn(`cleanup of ${id}: ${e.message}`));
      await fs.promises.rmdir(mountPoint).catch(() => undefined);
      await fs.promises.rm(egressDirOf(mountPoint), { recursive: true, force: true });
      await fs.promises.rm(relayDirOf(mountPoint), { recursive: true, force: true });
      this.keys.delete(mountKey);
      const detail = stderr.trim() ? ` (runner stderr: ${stderr.trim().slice(-300)})` : '';
      if (err instanceof SandboxError) throw err;
      throw new SandboxInternalError(
        'POOLED_START',
        `cannot start a pooled container: ${(err as Error).message}${detail}`,
        { retriable: true, cause: err },
      );
    }
  }

  /** True when the runner forks and execs a command in time. */
  async healthy(container: PooledContainer): Promise<boolean> {
    if (!container.alive) return false;
    try {
      await container.connection.ping(this.options.healthCheckTimeoutMs);
      return true;
    } catch (err) {
      const why = err instanceof RunnerTimeoutError ? 'no answer (paused or hung?)' : (err as Error).message;
      this.logger.warn(`container ${container.shortId} failed its health check: ${why}`);
      return false;
    }
  }

  /**
   * Removes the container (killing everything in it), then unmounts the session workspace from its mount point
   * and removes the now empty directory. Idempotent; concurrent callers share one attempt, a failed attempt can
   * be retried.
   */
  destroy(container: PooledContainer): Promise<void> {
    container.state = 'destroyed';
    container.destroying ??= this.teardown(container).catch((err: unknown) => {
      container.destroying = undefined;
      throw err;
    });
    return container.destroying;
  }

  private async teardown(container: PooledContainer): Promise<void> {
    container.connection.close();
    await this.docker.remove(container.id);
    await this.release(container.mountKey);
    this.live.delete(container.id);
    this.logger.debug(`container ${container.shortId} destroyed`);
  }

  /**
   * Unmounts and removes a mount-point directory (never recursive: a still-mounted workspace must survive), and the
   * container's egress and relay directories (sockets at most: never a mount).
   */
  async release(mountKey: string): Promise<void> {
    const mountPoint = path.join(this.options.mountRoot, mountKey);
    await fs.promises.rm(egressDirOf(mountPoint), { recursive: true, force: true });
    await fs.promises.rm(relayDirOf(mountPoint), { recursive: true, force: true });
    await this.mounts.unmount(mountPoint);
    try {
      await fs.promises.rmdir(mountPoint);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ENOENT') throw err;
    }
    this.keys.delete(mountKey);
  }
}

export async function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      promise,
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new RunnerTimeoutError(message)), ms);
      }),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * The container's relay directory, the sandbox user's (the runner binds its socket there). An engine that may not
 * give it away (not root) leaves it its own: the runner then has no relay, and the engine uses the runner's stdio.
 */
async function makeRelayDir(dir: string): Promise<void> {
  await fs.promises.mkdir(dir, { mode: 0o700 });
  await fs.promises.chown(dir, SANDBOX_UID, SANDBOX_UID).catch(() => undefined);
}
