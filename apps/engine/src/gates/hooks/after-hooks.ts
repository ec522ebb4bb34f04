import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { type ActionResult, CLOCK, type Clock } from '@switchyard/common';
import { randomBytes } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import { ENGINE_HOOKS } from './engine-hooks';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { PolicyFacts } from '../../state/policies/policy.types';
import { HookClient } from './hook-client';
import {
  type HookDelivery,
  HookDeliveryStore,
  type PendingDelivery,
} from '../../state/hooks/hook-deliveries.store';
import type { HookDefinition } from './hook-file';
import { type ArmedHook, armHooks, backoffMs, type HookedAction } from './hooked-action';

interface Entry {
  delivery: HookDelivery;
  hook: HookDefinition;
  payload: string;
  /** Monotonic ms when it may be tried (next). */
  dueAt: number;
  /** Whether its row was written: nothing is tried or recorded before, nothing at all if it could not be. */
  stored: Promise<boolean>;
}

const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 60_000;
const STORED = Promise.resolve(true);

/**
 * After-action hooks: every ended action's result (redacted, as its caller got it) goes to each after-hook that sees
 * it, through a bounded queue that never holds up the engine: deliveries are recorded first (engine.db, or Postgres
 * with replicas), tried SWITCHYARD_HOOK_CONCURRENCY at a time, retried with exponential backoff and jitter, and picked
 * up again after a stop or crash (by the next engine, or by the replica that takes over one that died). The queue is
 * this engine's: when it is full the oldest waiting delivery is dropped, and recorded so.
 */
@Injectable()
export class AfterHooks implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('Hooks');
  private readonly hooks: ArmedHook[];
  private readonly byName: Map<string, HookDefinition>;
  private readonly waiting: Entry[] = [];
  private active = 0;
  private timer?: NodeJS.Timeout;
  private stopped = false;
  private readonly stopping = new AbortController();
  private readonly settledWaiters: Array<() => void> = [];
  /** Writes under way that no queued entry waits for (new rows, dropped deliveries): what `settled` awaits too. */
  private readonly writes = new Set<Promise<void>>();

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly client: HookClient,
    private readonly deliveries: HookDeliveryStore,
    @Inject(ENGINE_HOOKS) hooks: HookDefinition[],
  ) {
    const after = hooks.filter((h) => h.phase === 'after');
    this.hooks = armHooks(after);
    this.byName = new Map(after.map((h) => [h.name, h]));
  }

  async onModuleInit(): Promise<void> {
    this.resume(await this.deliveries.pending(), 'left pending');
  }

  onApplicationShutdown(): void {
    // Pending deliveries stay recorded for the next start (or the replica that takes this one over).
    this.stopped = true;
    this.stopping.abort();
    clearTimeout(this.timer);
  }

  /** Queues the result for every after-hook that sees the action. Never throws, never waits for a hook. */
  enqueue(action: HookedAction, result: ActionResult, facts: PolicyFacts): void {
    for (const { hook } of this.hooks.filter((h) => h.sees(facts))) {
      const now = this.clock.now().toISOString();
      const delivery: HookDelivery = {
        id: `hkd_${randomBytes(12).toString('hex')}`,
        hook: hook.name,
        phase: 'after',
        actionId: action.id,
        sessionId: action.sessionId,
        tenant: action.tenant,
        status: 'pending',
        attempts: 0,
        createdAt: now,
        updatedAt: now,
      };
      const payload = JSON.stringify({
        event: 'action.completed',
        deliveryId: delivery.id,
        hook: hook.name,
        action,
        result,
      });
      const stored = this.deliveries.insert(delivery, payload).then(
        () => true,
        (err: unknown) => {
          this.logger.error({
            msg: 'could not record an after-hook delivery',
            hook: hook.name,
            err: String(err),
          });
          const i = this.waiting.indexOf(entry);
          if (i >= 0) this.waiting.splice(i, 1);
          this.pump();
          return false;
        },
      );
      // Queued at once, so the queue keeps call order whatever order the writes land in.
      const entry: Entry = { delivery, hook, payload, dueAt: this.clock.monotonic(), stored };
      this.track(stored.then(() => undefined));
      this.waiting.push(entry);
      while (this.waiting.length > this.config.hooks.queue) {
        this.track(
          this.finish(this.waiting.shift()!, 'dropped', 'the queue was full (SWITCHYARD_HOOK_QUEUE)'),
        );
      }
    }
    this.pump();
  }

  /**
   * Takes over the pending deliveries of `replica`, a replica that died (SWITCHYARD_STATE=postgres): claims them (of
   * replicas trying at once, one gets each) and delivers them as those left at a stop. Retried until the claim lands
   * or this engine stops; never throws. Answers how many it took.
   */
  async resumeFrom(replica: string): Promise<number> {
    for (let wait = BACKOFF_BASE_MS; !this.stopped; wait = Math.min(wait * 2, BACKOFF_MAX_MS)) {
      try {
        const adopted = await this.deliveries.adoptFrom(replica);
        this.resume(adopted, `of replica ${replica}`);
        return adopted.length;
      } catch (err) {
        this.logger.warn({
          msg: 'cannot take over the after-hook deliveries of a replica yet; retrying',
          replica,
          err: String(err),
        });
        await sleep(wait, undefined, { signal: this.stopping.signal }).catch(() => undefined);
      }
    }
    return 0;
  }

  /** How many deliveries wait or are under way. */
  get backlog(): number {
    return this.waiting.length + this.active;
  }

  /**
   * @internal Tests: resolves once nothing waits or is under way (stopped: once what it holds is written, as it
   * delivers no more), and every outcome is recorded.
   */
  async settled(): Promise<void> {
    for (;;) {
      if (this.backlog > 0 && !this.stopped)
        await new Promise<void>((resolve) => this.settledWaiters.push(resolve));
      else if (this.writes.size > 0) await Promise.all(this.writes);
      else return;
    }
  }

  /** Queues deliveries this engine now claims (left pending at a stop, or adopted), dropping those of gone hooks. */
  private resume(left: PendingDelivery[], whose: string): void {
    let resumed = 0;
    for (const { delivery, payload } of left) {
      const hook = this.byName.get(delivery.hook);
      const entry: Entry = {
        delivery,
        hook: hook ?? ({ name: delivery.hook } as HookDefinition),
        payload,
        dueAt: this.clock.monotonic(),
        stored: STORED,
      };
      if (!hook) {
        this.track(this.finish(entry, 'dropped', 'the hook is no longer configured'));
        continue;
      }
      this.waiting.push(entry);
      resumed++;
    }
    if (resumed > 0) {
      this.logger.log({ msg: `resuming ${resumed} after-hook deliveries ${whose}` });
      this.pump();
    }
  }

  private pump(): void {
    if (this.stopped) return;
    clearTimeout(this.timer);
    const now = this.clock.monotonic();
    while (this.active < this.config.hooks.concurrency) {
      const i = this.waiting.findIndex((e) => e.dueAt <= now);
      if (i < 0) break;
      const [entry] = this.waiting.splice(i, 1);
      this.active++;
      void this.attempt(entry).finally(() => {
        this.active--;
        this.pump();
      });
    }
    if (this.waiting.length > 0 && this.active < this.config.hooks.concurrency) {
      const next = Math.min(...this.waiting.map((e) => e.dueAt));
      this.timer = setTimeout(() => this.pump(), Math.max(0, next - now));
      this.timer.unref();
    }
    if (this.backlog === 0) for (const resolve of this.settledWaiters.splice(0)) resolve();
  }

  private async attempt(entry: Entry): Promise<void> {
    if (!(await entry.stored)) return;
    const { delivery, hook } = entry;
    delivery.attempts++;
    try {
      const reply = await this.client.post(hook, 'action.completed', delivery.id, entry.payload);
      delivery.lastStatus = reply.status;
      if (reply.status >= 200 && reply.status < 300) {
        delete delivery.lastError;
        await this.finish(entry, 'delivered');
        return;
      }
      delivery.lastError = `HTTP ${reply.status}`;
    } catch (err) {
      delivery.lastError = (err as Error).message;
    }
    if (this.stopped) return;
    if (delivery.attempts > hook.retries) {
      this.logger.warn({
        msg: 'after-hook delivery failed',
        hook: hook.name,
        actionId: delivery.actionId,
        error: delivery.lastError,
      });
      await this.finish(entry, 'failed');
      return;
    }
    const wait = backoffMs(delivery.attempts, BACKOFF_BASE_MS, BACKOFF_MAX_MS);
    entry.dueAt = this.clock.monotonic() + wait;
    delivery.nextAttemptAt = new Date(this.clock.now().getTime() + wait).toISOString();
    delivery.updatedAt = this.clock.now().toISOString();
    if (await this.record(delivery)) this.waiting.push(entry);
  }

  private async finish(
    entry: Entry,
    status: 'delivered' | 'failed' | 'dropped',
    why?: string,
  ): Promise<void> {
    const { delivery } = entry;
    delivery.status = status;
    if (why) delivery.lastError = why;
    delete delivery.nextAttemptAt;
    delivery.updatedAt = this.clock.now().toISOString();
    if (await entry.stored) await this.record(delivery);
  }

  /**
   * Writes the delivery's row; false when it is no longer this engine's to deliver (another replica adopted it, this
   * one having been judged dead). A write that fails is logged, and the delivery kept: its row stays pending.
   */
  private async record(delivery: HookDelivery): Promise<boolean> {
    try {
      if (await this.deliveries.update(delivery)) return true;
      this.logger.warn({
        msg: 'after-hook delivery was taken over by another replica; leaving it to that one',
        hook: delivery.hook,
        deliveryId: delivery.id,
      });
      return false;
    } catch (err) {
      this.logger.error({
        msg: 'could not record an after-hook delivery',
        hook: delivery.hook,
        err: String(err),
      });
      return true;
    }
  }

  private track(write: Promise<void>): void {
    this.writes.add(write);
    void write.finally(() => this.writes.delete(write));
  }
}
