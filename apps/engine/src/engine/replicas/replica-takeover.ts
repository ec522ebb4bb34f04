import { Inject, Injectable, Logger } from '@nestjs/common';
import { ModuleRef } from '@nestjs/core';
import { CLOCK, type Clock } from '@switchyard/common';
import { ContextGraph } from '@switchyard/context-graph';
import { KubernetesSandbox } from '@switchyard/sandbox';
import { ENGINE_INSTANCE_ID } from '../../platform/config/config.tokens';
import { SessionEventLog } from '../../state/events/session-event-log';
import { SessionEvents } from '../../session/events/session-events';
import { AfterHooks } from '../../gates/hooks/after-hooks';
import { PlanExecutor } from '../plans/plan-executor.service';
import type { Session } from '../../state/sessions/session.model';
import { type SessionRowPg, sessionFromRow } from '../../state/sessions/postgres-session.store';
import { SessionsService } from '../../session/sessions/sessions.service';
import { PostgresDb } from '../../state/storage/postgres-db';

/** Sessions adopted at once (each claims a pod). */
const ADOPT_CONCURRENCY = 4;

/** What one takeover did (logged, and what the tests read). */
export interface TakeoverReport {
  replica: string;
  sessions: string[];
  interrupted: number;
  podsReaped: string[];
}

/**
 * Takes over the sessions of a replica whose lease ran out, once across all replicas: the claim of the dead replica
 * and the move of its sessions are one transaction (a second claimer finds it taken), so its running actions are
 * marked `interrupted` once, by the one replica that now serves those sessions. Then its plans left running end
 * `interrupted`, each session is opened here with its event ids continued, adopting the pod the dead replica left
 * (workspace, kernels and processes kept; a fresh pod when it cannot be adopted), and its other pods are deleted.
 */
@Injectable()
export class ReplicaTakeover {
  private readonly logger = new Logger('ReplicaTakeover');
  private readonly adopting = new Map<string, Promise<void>>();
  private readonly running = new Map<string, Promise<TakeoverReport | undefined>>();

  constructor(
    @Inject(ENGINE_INSTANCE_ID) private readonly replicaId: string,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly db: PostgresDb,
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly events: SessionEvents,
    private readonly eventLog: SessionEventLog,
    private readonly plans: PlanExecutor,
    private readonly ref: ModuleRef,
    private readonly afterHooks: AfterHooks,
  ) {}

  /** Takes `replica` over unless another replica did (or its lease was renewed); one run per replica at a time. */
  takeOver(replica: string): Promise<TakeoverReport | undefined> {
    let run = this.running.get(replica);
    if (!run) {
      run = this.takeOverOnce(replica).finally(() => this.running.delete(replica));
      this.running.set(replica, run);
    }
    return run;
  }

  /** Resolves once the session, if this replica is adopting it, is ready to serve. */
  async ready(sessionId: string): Promise<void> {
    await this.adopting.get(sessionId);
  }

  private async takeOverOnce(replica: string): Promise<TakeoverReport | undefined> {
    const moved = await this.db.tx(async (c) => {
      const claim = await c.query(
        `UPDATE replicas SET taken_over_by = $1, taken_over_at = now()
         WHERE id = $2 AND taken_over_by IS NULL AND lease_until < now() RETURNING id`,
        [this.replicaId, replica],
      );
      if (claim.rowCount !== 1) return undefined;
      const rows = await c.query<SessionRowPg>(
        'UPDATE sessions SET owner = $1 WHERE owner = $2 RETURNING *',
        [this.replicaId, replica],
      );
      return rows.rows.map(sessionFromRow);
    });
    if (!moved) return undefined;
    const ids = moved.map((s) => s.id);
    // Adoption waits for the graph: an action of these sessions must not start before the old ones are closed.
    const done = this.finishTakeover(replica, moved);
    for (const id of ids)
      this.adopting.set(
        id,
        done.then(() => undefined).catch(() => undefined),
      );
    try {
      return await done;
    } finally {
      for (const id of ids) this.adopting.delete(id);
    }
  }

  private async finishTakeover(replica: string, moved: Session[]): Promise<TakeoverReport> {
    const ids = moved.map((s) => s.id);
    const endedAt = this.clock.now().toISOString();
    const interrupted =
      ids.length === 0 ? 0 : await this.retrying(() => this.graph.markRunningInterrupted(endedAt, ids));
    await this.db.query('UPDATE replicas SET interrupted = $2 WHERE id = $1', [replica, interrupted]);
    if (ids.length > 0) await this.plans.interruptLeftRunning(ids);
    this.kubernetes()?.sessions.adoptFrom(replica);
    const queue = [...moved];
    const adoptNext = async (): Promise<void> => {
      for (let s = queue.shift(); s; s = queue.shift()) {
        this.events.restore(s.id, await this.eventLog.recent(s.id));
        await this.sessions
          .adopt(s)
          .catch((err: unknown) =>
            this.logger.error({ msg: 'cannot open a session taken over', sessionId: s.id, err: String(err) }),
          );
      }
    };
    await Promise.all(Array.from({ length: ADOPT_CONCURRENCY }, adoptNext));
    // What was not adopted: warm and one-off pods, session pods whose runner would not resync.
    const podsReaped = await this.reapPods(replica);
    await this.afterHooks.resumeFrom(replica);
    const report = { replica, sessions: ids, interrupted, podsReaped };
    this.logger.warn({ msg: 'took over the sessions of a replica whose lease ran out', ...report });
    return report;
  }

  /**
   * Retries a graph write until it lands (Neo4j may be down): the actions must end `interrupted` before the sessions
   * run again. Should this replica die meanwhile, whoever takes it over marks them, as they are its sessions now.
   */
  private async retrying<T>(write: () => Promise<T>): Promise<T> {
    for (let wait = 500; ; wait = Math.min(wait * 2, 10_000)) {
      try {
        return await write();
      } catch (err) {
        this.logger.warn({
          msg: 'cannot mark the actions of a replica taken over yet; retrying',
          err: String(err),
        });
        await new Promise((r) => setTimeout(r, wait));
      }
    }
  }

  private kubernetes(): KubernetesSandbox | undefined {
    try {
      return this.ref.get(KubernetesSandbox, { strict: false });
    } catch {
      return undefined; // not the Kubernetes backend
    }
  }

  /** The dead replica's pods (on the Kubernetes backend, the only one replicas run on). Logged, never thrown. */
  private async reapPods(replica: string): Promise<string[]> {
    const k8s = this.kubernetes();
    if (!k8s) return [];
    try {
      return await k8s.reaper.reapEngine(replica);
    } catch (err) {
      this.logger.error({ msg: 'cannot delete the pods of a replica taken over', replica, err: String(err) });
      return [];
    }
  }
}
