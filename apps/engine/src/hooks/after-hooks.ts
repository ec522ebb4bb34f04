import { Inject, Injectable, Logger, OnApplicationShutdown, OnModuleInit } from '@nestjs/common';
import { type ActionResult, CLOCK, type Clock } from '@switchyard/common';
import { randomBytes } from 'node:crypto';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import type { PolicyFacts } from '../policies/policy.types';
import { HookClient } from './hook-client';
import { type HookDelivery, HookDeliveryStore } from './hook-deliveries.store';
import type { HookDefinition } from './hook-file';
import { type ArmedHook, armHooks, backoffMs, type HookedAction } from './hooked-action';

interface Entry {
  delivery: HookDelivery;
  hook: HookDefinition;
  payload: string;
  /** Monotonic ms when it may be tried (next). */
  dueAt: number;
}

const BACKOFF_BASE_MS = 500;
const BACKOFF_MAX_MS = 60_000;

/**
 * After-action hooks: every ended action's result (redacted, as its caller got it) goes to each after-hook that sees
 * it, through a bounded queue that never holds up the engine: deliveries are written to engine.db first, tried
 * SWITCHYARD_HOOK_CONCURRENCY at a time, retried with exponential backoff and jitter, and picked up again by the next
 * engine after a stop or crash. When the queue is full the oldest waiting delivery is dropped, and recorded so.
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
  private readonly settledWaiters: Array<() => void> = [];

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly client: HookClient,
    private readonly deliveries: HookDeliveryStore,
  ) {
    const after = config.hooks.hooks.filter((h) => h.phase === 'after');
    this.hooks = armHooks(after);
    this.byName = new Map(after.map((h) => [h.name, h]));
  }

  onModuleInit(): void {
    // What an earlier engine left pending: delivered now, unless its hook is no longer configured.
    for (const { delivery, payload } of this.deliveries.pending()) {
      const hook = this.byName.get(delivery.hook);
      if (!hook) {
        this.finish(
          { delivery, hook: { name: delivery.hook } as HookDefinition, payload, dueAt: 0 },
          'dropped',
          'the hook is no longer configured',
        );
        continue;
      }
      this.waiting.push({ delivery, hook, payload, dueAt: this.clock.monotonic() });
    }
    if (this.waiting.length > 0) {
      this.logger.log({ msg: `resuming ${this.waiting.length} after-hook deliveries left pending` });
      this.pump();
    }
  }

  onApplicationShutdown(): void {
    // Pending deliveries stay in engine.db for the next start.
    this.stopped = true;
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
      try {
        this.deliveries.insert(delivery, payload);
      } catch (err) {
        this.logger.error({
          msg: 'could not record an after-hook delivery',
          hook: hook.name,
          err: String(err),
        });
        continue;
      }
      this.waiting.push({ delivery, hook, payload, dueAt: this.clock.monotonic() });
      while (this.waiting.length > this.config.hooks.queue) {
        this.finish(this.waiting.shift()!, 'dropped', 'the queue was full (SWITCHYARD_HOOK_QUEUE)');
      }
    }
    this.pump();
  }

  /** How many deliveries wait or are under way. */
  get backlog(): number {
    return this.waiting.length + this.active;
  }

  /** @internal Tests: resolves once nothing waits or is under way. */
  settled(): Promise<void> {
    if (this.backlog === 0) return Promise.resolve();
    return new Promise((resolve) => this.settledWaiters.push(resolve));
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
    const { delivery, hook } = entry;
    delivery.attempts++;
    try {
      const reply = await this.client.post(hook, 'action.completed', delivery.id, entry.payload);
      delivery.lastStatus = reply.status;
      if (reply.status >= 200 && reply.status < 300) {
        delete delivery.lastError;
        this.finish(entry, 'delivered');
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
      this.finish(entry, 'failed');
      return;
    }
    const wait = backoffMs(delivery.attempts, BACKOFF_BASE_MS, BACKOFF_MAX_MS);
    entry.dueAt = this.clock.monotonic() + wait;
    delivery.nextAttemptAt = new Date(this.clock.now().getTime() + wait).toISOString();
    delivery.updatedAt = this.clock.now().toISOString();
    this.deliveries.update(delivery);
    this.waiting.push(entry);
  }

  private finish(entry: Entry, status: 'delivered' | 'failed' | 'dropped', why?: string): void {
    const { delivery } = entry;
    delivery.status = status;
    if (why) delivery.lastError = why;
    delete delivery.nextAttemptAt;
    delivery.updatedAt = this.clock.now().toISOString();
    try {
      this.deliveries.update(delivery);
    } catch (err) {
      this.logger.error({
        msg: 'could not record an after-hook delivery',
        hook: delivery.hook,
        err: String(err),
      });
    }
  }
}
