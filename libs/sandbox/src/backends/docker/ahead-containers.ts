import { randomBytes } from 'node:crypto';
import type { Logger } from '@nestjs/common';
import type { ContainerCreateOptions } from 'dockerode';
import { LABEL_ACTION } from './container.constants';
import type { ContainerReaper } from './container-reaper';
import type { AheadOptions } from './container.options';
import type { ContainerStreams, DockerClient } from './docker-client';

/** `dev.switchyard.action` of a container started ahead: no action has it yet. */
export const AHEAD_ACTION_LABEL = 'ahead';

/** A one-off container started for a session's next run, waiting on stdin for its code (see `CODE_LOADER`). */
export interface AheadContainer {
  readonly id: string;
  /** Its stdio, attached before it started: nothing it wrote is lost. */
  readonly streams: ContainerStreams;
}

interface Entry {
  readonly sessionId: string;
  /** The settings it was created with (`settingsKey`): a run with other settings cannot use it. */
  readonly key: string;
  /** Resolves with the container once started, or `undefined` when that failed (nothing is left of it then). */
  ready: Promise<AheadContainer | undefined>;
  /** Its stdio closed before a run took it: the container has exited and is useless. */
  exited: boolean;
  idleTimer?: NodeJS.Timeout;
}

/**
 * One-off containers started ahead (issue 34): after a session's run in the one-off tier (from its second: the tier
 * decides), the next container for that session is created, attached and started with the same settings, and waits, running nothing but the loader blocked
 * on its stdin, until the session's next run takes it. Each container still runs exactly one action and is removed
 * after it: none is ever reused. What a started-ahead container saves is the container's start (under gVisor, its
 * kernel's boot), about four fifths of a one-off run here.
 *
 * At most one per session and `max` in all (the least recently made goes first); one not taken within `idleMs`, one
 * whose settings no longer match the session's next run (other environment, image or egress, a call channel, code past
 * the code tmpfs), and those of an ended session are removed. The labels are the tier's, so a crashed engine's are
 * reaped like its one-off containers.
 */
export class AheadContainers {
  private readonly entries = new Map<string, Entry>();
  private closed = false;

  constructor(
    private readonly docker: DockerClient,
    private readonly reaper: ContainerReaper,
    private readonly options: AheadOptions,
    private readonly logger: Logger,
  ) {}

  /** Containers held now (started or starting). */
  get size(): number {
    return this.entries.size;
  }

  /** Ids of the started containers held now (the reaper leaves them alone). */
  async ids(): Promise<string[]> {
    const ready = await Promise.all([...this.entries.values()].map((e) => e.ready));
    return ready.flatMap((c) => (c ? [c.id] : []));
  }

  /**
   * The session's container started ahead, when it was made with exactly `spec`'s settings and is still waiting; it is
   * no longer held. One that does not fit is removed in the background. Never throws.
   */
  async take(sessionId: string, spec: ContainerCreateOptions): Promise<AheadContainer | undefined> {
    const entry = this.entries.get(sessionId);
    if (!entry) return undefined;
    this.forget(entry);
    const container = await entry.ready;
    if (!container) return undefined;
    if (entry.key === settingsKey(spec) && !entry.exited) return container;
    this.discard(sessionId, container);
    return undefined;
  }

  /**
   * Starts the session's next container with `spec`'s settings (a fresh name, no action), unless the session has one
   * or none may be made. Resolves once it is started or failed; never throws.
   */
  async prepare(sessionId: string, spec: ContainerCreateOptions): Promise<void> {
    if (this.closed || this.options.max === 0 || this.entries.has(sessionId)) return;
    while (this.entries.size >= this.options.max) {
      const [oldest] = this.entries.values();
      this.forget(oldest);
      void oldest.ready.then((c) => c && this.discard(oldest.sessionId, c));
    }
    const entry: Entry = {
      sessionId,
      key: settingsKey(spec),
      ready: Promise.resolve(undefined),
      exited: false,
    };
    entry.ready = this.start(sessionId, {
      ...spec,
      name: `switchyard-ahead-${randomBytes(6).toString('hex')}`,
      Labels: { ...spec.Labels, [LABEL_ACTION]: AHEAD_ACTION_LABEL },
    }).then((container) => {
      if (!container) {
        this.forget(entry);
        return undefined;
      }
      void container.streams.closed.then(() => (entry.exited = true));
      // Taken, evicted or released while it started: whoever did that uses or removes it.
      if (this.entries.get(sessionId) !== entry) return container;
      entry.idleTimer = setTimeout(() => {
        if (this.entries.get(sessionId) !== entry) return;
        this.forget(entry);
        this.discard(sessionId, container);
      }, this.options.idleMs).unref();
      return container;
    });
    this.entries.set(sessionId, entry);
    await entry.ready;
  }

  /** Removes the session's container started ahead, if any. */
  async releaseSession(sessionId: string): Promise<void> {
    const entry = this.entries.get(sessionId);
    if (!entry) return;
    this.forget(entry);
    const container = await entry.ready;
    if (container) await this.remove(sessionId, container);
  }

  /** Makes no more and removes every one held. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all([...this.entries.keys()].map((s) => this.releaseSession(s)));
  }

  private async start(sessionId: string, spec: ContainerCreateOptions): Promise<AheadContainer | undefined> {
    let id: string | undefined;
    try {
      id = await this.docker.createContainer(spec);
      const streams = await this.docker.attach(id);
      streams.stdin.on('error', () => undefined);
      streams.stdout.on('error', () => undefined);
      streams.stderr.on('error', () => undefined);
      try {
        await this.docker.start(id);
      } catch (err) {
        streams.destroy();
        throw err;
      }
      return { id, streams };
    } catch (err) {
      this.logger.debug(`no container started ahead for session ${sessionId}: ${(err as Error).message}`);
      if (id !== undefined) await this.reaper.remove(id, sessionId);
      return undefined;
    }
  }

  private forget(entry: Entry): void {
    clearTimeout(entry.idleTimer);
    if (this.entries.get(entry.sessionId) === entry) this.entries.delete(entry.sessionId);
  }

  private discard(sessionId: string, container: AheadContainer): void {
    void this.remove(sessionId, container);
  }

  private async remove(sessionId: string, container: AheadContainer): Promise<void> {
    container.streams.destroy();
    await this.reaper.remove(container.id, sessionId);
  }
}

/** A container's settings, whatever its name and action: two runs with the same key can use the same container. */
export function settingsKey(spec: ContainerCreateOptions): string {
  const { name: _name, Labels, ...rest } = spec as ContainerCreateOptions & { name?: string };
  const { [LABEL_ACTION]: _action, ...labels } = Labels ?? {};
  return JSON.stringify({ ...rest, Labels: labels });
}
