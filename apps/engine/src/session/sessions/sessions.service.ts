import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { CLOCK, type Clock, InvalidInputError, NotFoundError, SwitchyardError } from '@switchyard/common';
import { ContextGraph, type SessionActivity } from '@switchyard/context-graph';
import { EgressPolicy } from '@switchyard/network';
import { randomBytes } from 'node:crypto';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { readPolicy } from '../../state/policies/policy-rules';
import { TemplateRegistry } from '../templates/template-registry';
import { SessionWorkspaces } from '../workspaces/session-workspaces';
import { type Session } from '../../state/sessions/session.model';
import { SessionStore } from '../../state/sessions/session.store';

export type SessionEndReason = 'deleted' | 'expired';

/**
 * Called before a session is durably ended (and its DELETE answered): to fence it, so that nothing of it runs again —
 * stop its running actions and plans, close its streams, forget its network. Must be quick: it is on the answer's path.
 */
export type SessionEndHook = (sessionId: string, reason: SessionEndReason) => Promise<void>;

/**
 * Called in the background once the session has durably ended, before its workspace is removed: frees what each kind
 * of action holds for it (containers, processes, browser contexts). A crash before it finishes leaves what the
 * start-up reapers remove: the restarted engine no longer knows the session.
 */
export type SessionTeardownHook = (sessionId: string) => Promise<void>;

export class SessionLimitError extends SwitchyardError {
  readonly code = 'SESSION_LIMIT';
  readonly kind = 'unavailable' as const;
  override readonly retriable = true;
}

const MAX_METADATA_BYTES = 16 * 1024;

/**
 * Owns session lifecycles: creation (workspace + graph node), lookup scoped to a tenant, sliding
 * idle expiry, and release of everything a session holds when it ends.
 */
@Injectable()
export class SessionsService implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger(SessionsService.name);
  private readonly sessions = new Map<string, Session>();
  private readonly dirtyActivity = new Set<string>();
  private readonly ending = new Map<string, Promise<void>>();
  private readonly endHooks: SessionEndHook[] = [];
  private readonly teardownHooks: SessionTeardownHook[] = [];
  /** Teardowns of ended sessions still running in the background; shutdown waits for them. */
  private readonly teardowns = new Set<Promise<void>>();
  private readonly busy = new Map<string, number>();
  private sweepTimer?: NodeJS.Timeout;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly store: SessionStore,
    private readonly workspaces: SessionWorkspaces,
    private readonly graph: ContextGraph,
    private readonly templates: TemplateRegistry,
  ) {}

  async onModuleInit(): Promise<void> {
    for (const s of await this.store.loadAll()) this.sessions.set(s.id, s);
    // A crash between making a session's workspace and recording the session leaves a workspace nobody owns.
    const orphans = await this.workspaces.removeOrphans(new Set(this.sessions.keys()));
    if (orphans.length > 0) {
      this.logger.warn({ msg: `removed ${orphans.length} workspace(s) of sessions never recorded`, orphans });
    }
    // Capped workspaces are unmounted at shutdown (or by a reboot): open them again before any action runs.
    for (const s of this.sessions.values()) {
      await this.workspaces.open(s.id, { reopen: true, ...this.imageOf(s.template) });
    }
    this.sweepTimer = setInterval(() => void this.sweep(), this.config.sessions.sweepIntervalMs);
    this.sweepTimer.unref();
  }

  async onApplicationShutdown(): Promise<void> {
    clearInterval(this.sweepTimer);
    await Promise.allSettled(this.ending.values());
    await Promise.allSettled(this.teardowns);
    await this.flushActivity();
  }

  onSessionEnd(hook: SessionEndHook): void {
    this.endHooks.push(hook);
  }

  onSessionTeardown(hook: SessionTeardownHook): void {
    this.teardownHooks.push(hook);
  }

  /** Resolves once every teardown begun so far has finished (shutdown; tests). */
  async settled(): Promise<void> {
    await Promise.allSettled(this.ending.values());
    await Promise.allSettled(this.teardowns);
  }

  /**
   * Opens a session. `origin`: a fork's — the session it comes from, and what makes its workspace (a copy) instead
   * of an empty one; the copy is removed again should the session not be recorded.
   */
  async create(
    tenant: string,
    input: {
      metadata?: Record<string, unknown>;
      ttlSeconds?: number;
      maxConcurrentActions?: number;
      network?: { allow: string[] };
      template?: string;
      policy?: unknown;
    },
    origin?: { forkedFrom: NonNullable<Session['forkedFrom']>; workspace: (id: string) => Promise<void> },
  ): Promise<Session> {
    const ttlSeconds = input.ttlSeconds ?? this.config.sessions.defaultTtlSeconds;
    if (ttlSeconds > this.config.sessions.maxTtlSeconds) {
      throw new InvalidInputError(
        'ttlSeconds',
        `ttlSeconds must be at most ${this.config.sessions.maxTtlSeconds} (SWITCHYARD_MAX_SESSION_TTL_SECONDS)`,
      );
    }
    const metadata = input.metadata ?? {};
    if (Buffer.byteLength(JSON.stringify(metadata)) > MAX_METADATA_BYTES) {
      throw new InvalidInputError('metadata', `metadata must be at most ${MAX_METADATA_BYTES} bytes as JSON`);
    }
    const network = this.networkPolicy(input.network);
    const policy = input.policy === undefined ? undefined : { rules: readPolicy(input.policy, 'policy') };
    if (input.template !== undefined) this.templates.require(input.template);
    if (this.sessions.size >= this.config.sessions.maxSessions) {
      throw new SessionLimitError(
        `the engine holds ${this.sessions.size} sessions, its limit (SWITCHYARD_MAX_SESSIONS); delete one or retry later`,
      );
    }
    const now = this.clock.now();
    const session: Session = {
      id: `ses_${randomBytes(12).toString('hex')}`,
      tenant,
      createdAt: now,
      lastActiveAt: now,
      ttlSeconds,
      metadata,
      maxConcurrentActions: input.maxConcurrentActions ?? this.config.actions.sessionConcurrency,
      network: { allow: network.allow },
      ...(input.template !== undefined && { template: input.template }),
      ...(origin && { forkedFrom: origin.forkedFrom }),
      ...(policy && { policy }),
    };
    if (origin) await origin.workspace(session.id);
    else await this.workspaces.open(session.id, this.imageOf(input.template));
    try {
      await this.graph.recordSession({
        id: session.id,
        tenant,
        createdAt: now.toISOString(),
        metadata,
      });
      await this.store.insert(session);
    } catch (err) {
      await this.workspaces.close(session.id);
      throw err;
    }
    this.sessions.set(session.id, session);
    this.logger.log({ msg: 'session created', sessionId: session.id, tenant, ttlSeconds });
    return session;
  }

  /** The network a session asks for (or the engine default), within the engine's bound; a 400 names what is beyond. */
  private networkPolicy(asked: { allow: string[] } | undefined): EgressPolicy {
    const { bound } = this.config.network;
    if (!asked) return this.config.network.default;
    const policy = EgressPolicy.parse(asked.allow, 'network.allow');
    const beyond = policy.beyond(bound);
    if (beyond.length > 0) {
      throw new InvalidInputError(
        'network.allow',
        `${beyond.join(', ')} ${beyond.length > 1 ? 'are' : 'is'} beyond what this engine lets sessions reach ` +
          `(SWITCHYARD_EGRESS_ALLOWED: ${bound.isEmpty ? 'nothing' : bound.allow.join(', ')})`,
        'EGRESS_BEYOND_BOUND',
        { hosts: beyond },
      );
    }
    return policy;
  }

  /** The tenant's session, or 404. Another tenant's session is indistinguishable from a missing one. */
  get(tenant: string, id: string): Session {
    const s = this.sessions.get(id);
    if (!s || s.tenant !== tenant || this.ending.has(id)) {
      throw new NotFoundError(`session ${id} not found`, { sessionId: id });
    }
    return s;
  }

  /** A live session whatever its tenant (for admins); `undefined` when it does not exist or is ending. */
  find(id: string): Session | undefined {
    return this.ending.has(id) ? undefined : this.sessions.get(id);
  }

  /** The session exists and is not ending: events about it still have a stream to go to. */
  isLive(id: string): boolean {
    return this.sessions.has(id) && !this.ending.has(id);
  }

  list(tenant: string): Session[] {
    return [...this.sessions.values()].filter((s) => s.tenant === tenant && !this.ending.has(s.id));
  }

  /** The tenant's sessions whichever replica serves them (with replicas), else this engine's. */
  async listAll(tenant: string): Promise<Session[]> {
    const shared = await this.store.listShared(tenant);
    if (shared === undefined) return this.list(tenant);
    // This replica's own are the live objects (activity not yet flushed); ending ones are gone already.
    return shared.filter((s) => !this.ending.has(s.id)).map((s) => this.sessions.get(s.id) ?? s);
  }

  /**
   * Starts serving a session another replica served (it died): its workspace is reopened as after a restart (on
   * Kubernetes, the pod the dead replica left is adopted). Idempotent.
   */
  async adopt(session: Session): Promise<void> {
    if (this.sessions.has(session.id)) return;
    this.sessions.set(session.id, session);
    await this.workspaces.open(session.id, { reopen: true, ...this.imageOf(session.template) });
  }

  /**
   * What each session has run, in the order given: one graph query for all of them (a list of sessions must not
   * cost a query per session). `undefined` for a session the graph holds no record of.
   */
  async activityOf(sessions: readonly Session[]): Promise<(SessionActivity | undefined)[]> {
    if (sessions.length === 0) return [];
    const activity = await this.graph.sessionActivity(sessions.map((s) => s.id));
    return sessions.map((s) => activity.get(s.id));
  }

  /** The session's workspace root: a host directory, or `/workspace` in its pod (see `SessionWorkspaces`). */
  workspaceOf(session: Session): string {
    return this.workspaces.root(session.id);
  }

  /** A template session's image, for a backend whose workspace lives in the session's own sandbox (its pod). */
  private imageOf(template: string | undefined): { image?: string } {
    if (template === undefined || this.workspaces.kind === 'host') return {};
    const entry = this.templates.entry(template);
    const image = entry && this.templates.expectedImage(entry).image;
    return image === undefined ? {} : { image };
  }

  /** Marks activity; keeps the session from expiring while it is used. */
  touch(session: Session): void {
    session.lastActiveAt = this.clock.now();
    this.dirtyActivity.add(session.id);
  }

  /** Every session the engine holds, whatever its tenant (for start-up sweeps). */
  knownIds(): ReadonlySet<string> {
    return new Set(this.sessions.keys());
  }

  /** Actions of the session admitted and not yet ended (`enter` … `leave`). */
  activeActions(id: string): number {
    return this.busy.get(id) ?? 0;
  }

  /** Brackets work that must not race with expiry. */
  enter(session: Session): void {
    this.busy.set(session.id, (this.busy.get(session.id) ?? 0) + 1);
  }

  leave(session: Session): void {
    const n = (this.busy.get(session.id) ?? 1) - 1;
    if (n <= 0) this.busy.delete(session.id);
    else this.busy.set(session.id, n);
    this.touch(session);
  }

  async delete(tenant: string, id: string): Promise<void> {
    this.get(tenant, id);
    await this.end(id, 'deleted');
  }

  /**
   * Ends a session once. Resolves when the session is fenced (its actions stopped, nothing of it can start again) and
   * durably ended (graph node closed, record removed); what it holds (containers, processes, mounts, its workspace)
   * is then removed in the background (`teardown`), off the caller's path.
   */
  end(id: string, reason: SessionEndReason): Promise<void> {
    const pending = this.ending.get(id);
    if (pending) return pending;
    const run = this.release(id, reason).finally(() => {
      this.ending.delete(id);
      this.sessions.delete(id);
      this.dirtyActivity.delete(id);
    });
    this.ending.set(id, run);
    return run;
  }

  private async release(id: string, reason: SessionEndReason): Promise<void> {
    for (const hook of this.endHooks) await hook(id, reason);
    await this.graph.endSession(id, this.clock.now().toISOString(), reason);
    // From here a restarted engine no longer knows the session: whatever the teardown has not removed yet is an
    // orphan its start-up reapers remove (containers and pods of dead engines, workspaces of unknown sessions).
    await this.store.remove(id);
    const teardown = this.teardown(id);
    this.teardowns.add(teardown);
    void teardown.finally(() => this.teardowns.delete(teardown));
    this.logger.log({ msg: 'session ended', sessionId: id, reason });
  }

  /** Removes what an ended session held. Never rejects: a failure is logged, its leftovers reaped later. */
  private async teardown(id: string): Promise<void> {
    for (const hook of this.teardownHooks) {
      await hook(id).catch((err: unknown) =>
        this.logger.error({
          msg: 'failed to free what an ended session held',
          sessionId: id,
          err: String(err),
        }),
      );
    }
    await this.workspaces.close(id).catch((err: unknown) =>
      this.logger.error({
        msg: "failed to remove an ended session's workspace",
        sessionId: id,
        err: String(err),
      }),
    );
  }

  /** Expires idle sessions and persists activity timestamps in one batch. */
  async sweep(): Promise<void> {
    await this.flushActivity();
    const now = this.clock.now().getTime();
    const expired = [...this.sessions.values()].filter(
      (s) =>
        !this.busy.has(s.id) &&
        !this.ending.has(s.id) &&
        s.lastActiveAt.getTime() + s.ttlSeconds * 1000 <= now,
    );
    for (const s of expired) {
      try {
        await this.end(s.id, 'expired');
      } catch (err) {
        this.logger.error({ msg: 'failed to expire session', sessionId: s.id, err: String(err) });
      }
    }
  }

  private async flushActivity(): Promise<void> {
    const entries = [...this.dirtyActivity]
      .map((id) => this.sessions.get(id))
      .filter((s): s is Session => s !== undefined)
      .map((s) => ({ id: s.id, lastActiveAt: s.lastActiveAt }));
    this.dirtyActivity.clear();
    try {
      await this.store.updateLastActive(entries);
    } catch (err) {
      this.logger.error({ msg: 'failed to persist session activity', err: String(err) });
    }
  }
}
