import type { Logger } from '@nestjs/common';
import { CONTAINER_TIER_LABEL, LABEL_ENGINE, LABEL_SESSION, LABEL_TIER } from './container.constants';
import { engineAliveHere, engineDeadHere } from '../../core/engine-instance';
import { type ResolvedContainerOptions } from './container.options';
import type { ContainerSummary, DockerClient } from './docker-client';

/** Deadline of the Docker calls made while shutting down, releasing a session or reaping. */
const CLEANUP_TIMEOUT_MS = 10_000;

/** What a reaping pass may remove besides the defaults (see `ContainerReaper.reapLeftovers`). */
export interface ReapOptions {
  /** Reap the containers of this engine, which the caller knows is dead, whatever their sessions. */
  engineInstanceId?: string;
  /** Whether a session is live; default the tier's `isSessionLive` option. */
  isLive?: (sessionId: string) => boolean | Promise<boolean>;
}

/**
 * Removes one-off containers (SECURITY.md #17): the tier's own once a run ends (a removal that fails is remembered
 * and retried), every container labelled with a session when the session ends, whichever engine started it, and the
 * leftovers of engines that died. Never removes a container of a run still in progress here.
 */
export class ContainerReaper {
  /** Containers whose removal failed, by id, with their session: retried on release, reaping and shutdown. */
  private readonly unremoved = new Map<string, string>();

  constructor(
    private readonly docker: DockerClient,
    private readonly options: ResolvedContainerOptions,
    private readonly logger: Logger,
  ) {}

  /** Removals that failed and wait for a retry. */
  get pending(): number {
    return this.unremoved.size;
  }

  /**
   * Removes a container by force. Never throws: a container that cannot be removed now is remembered and removed
   * later. `cleanup` bounds the call (shutdown and reaping must not hang on a stuck daemon). Resolves whether it went.
   */
  async remove(id: string, sessionId: string, cleanup = false): Promise<boolean> {
    try {
      await this.docker.remove(id, cleanup ? { timeoutMs: CLEANUP_TIMEOUT_MS } : undefined);
      this.unremoved.delete(id);
      return true;
    } catch (err) {
      this.unremoved.set(id, sessionId);
      this.logger.warn(
        `could not remove container ${id.slice(0, 12)} (retried later): ${(err as Error).message}`,
      );
      return false;
    }
  }

  /**
   * The session ended: removes every one-off container labelled with it, not only those this engine tracks (a dead
   * engine's leftover, one whose removal failed). The caller has stopped the session's runs here first. Never throws:
   * when Docker cannot be asked, the removals that failed before are still retried.
   */
  async removeSession(sessionId: string): Promise<void> {
    const ids = new Set([...this.unremoved].filter(([, s]) => s === sessionId).map(([id]) => id));
    try {
      const labelled = await this.docker.listByLabel(
        { [LABEL_TIER]: CONTAINER_TIER_LABEL, [LABEL_SESSION]: sessionId },
        { timeoutMs: CLEANUP_TIMEOUT_MS },
      );
      for (const c of labelled) ids.add(c.id);
    } catch (err) {
      this.logger.warn(
        `could not list the containers of session ${sessionId} (the reaper removes them later): ${(err as Error).message}`,
      );
    }
    await Promise.all([...ids].map((id) => this.remove(id, sessionId, true)));
  }

  /**
   * Removes one-off containers left behind, and resolves with their ids:
   * - every container of an engine that is provably dead on this host (`engineDeadHere`), whatever its session: its
   *   action was recorded `interrupted` when the successor started, and nothing will ever read the container;
   * - with `engineInstanceId`, every container of that engine (the caller knows it is dead);
   * - a container of an engine this host cannot judge (another host, an id of another shape) only when its session is
   *   not live (`isLive`), since its engine may be alive elsewhere and running it;
   * - a container of this engine only when its removal failed before and no run here still uses it.
   * Containers of engines alive on this host and those of `running` (runs in progress here) are never touched. A
   * removal that fails is remembered for the next pass.
   */
  async reapLeftovers(
    running: ReadonlySet<string | undefined>,
    options: ReapOptions = {},
  ): Promise<string[]> {
    const isLive = options.isLive ?? this.options.isSessionLive;
    const found = await this.docker.listByLabel(
      { [LABEL_TIER]: CONTAINER_TIER_LABEL, [LABEL_ENGINE]: options.engineInstanceId ?? true },
      { timeoutMs: CLEANUP_TIMEOUT_MS },
    );
    const removed: string[] = [];
    await Promise.all(
      found.map(async (c) => {
        if (running.has(c.id) || !(await this.isLeftover(c, options.engineInstanceId, isLive))) return;
        const engine = c.labels[LABEL_ENGINE];
        const session = c.labels[LABEL_SESSION];
        this.logger.log(
          `reaping leftover container ${c.id.slice(0, 12)} (engine ${engine}, session ${session})`,
        );
        if (await this.remove(c.id, session ?? '', true)) removed.push(c.id);
      }),
    );
    return removed;
  }

  /** Shutdown, once no run is left: removes every container labelled with this engine, and retries failed removals. */
  async removeAtShutdown(): Promise<void> {
    const ids = new Map(this.unremoved);
    try {
      const left = await this.docker.listByLabel(
        { [LABEL_TIER]: CONTAINER_TIER_LABEL, [LABEL_ENGINE]: this.options.engineInstanceId },
        { timeoutMs: CLEANUP_TIMEOUT_MS },
      );
      for (const c of left) ids.set(c.id, c.labels[LABEL_SESSION] ?? '');
    } catch (err) {
      this.logger.warn(
        `could not list this engine's containers at shutdown (the next start reaps them): ${(err as Error).message}`,
      );
    }
    await Promise.all([...ids].map(([id, session]) => this.remove(id, session, true)));
  }

  private async isLeftover(
    c: ContainerSummary,
    named: string | undefined,
    isLive: (sessionId: string) => boolean | Promise<boolean>,
  ): Promise<boolean> {
    if (named !== undefined) return true; // listed by that engine's label
    const engine = c.labels[LABEL_ENGINE] ?? '';
    if (engine === this.options.engineInstanceId) return this.unremoved.has(c.id);
    if (engineAliveHere(engine)) return false;
    if (engineDeadHere(engine)) return true;
    const session = c.labels[LABEL_SESSION];
    return session === undefined || !(await isLive(session));
  }
}
