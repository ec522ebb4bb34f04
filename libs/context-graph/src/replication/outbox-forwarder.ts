import { type ForwarderTimers, retryDelay, type RetryBackoffOptions, SYSTEM_TIMERS } from './forwarder-retry';
import { Logger } from '@nestjs/common';
import type { OutboxBatch, ReplicaTarget } from './replication.types';

/** The local side of the outbox (the embedded store). */
export interface Outbox {
  outboxBatch(maxEntries: number, maxBytes?: number): OutboxBatch;
  outboxAck(lastId: number): Promise<number>;
  outboxSize(): number;
}

export type { ForwarderTimers } from './forwarder-retry';

export interface OutboxForwarderOptions extends RetryBackoffOptions {
  /** Most outbox entries copied in one transaction. Default 500. */
  batchEntries?: number;
  /** About how much action data one transaction carries. Default 8 MiB. */
  batchBytes?: number;
  /**
   * How long a wake-up waits before copying, so a burst of writes goes to Neo4j in one transaction instead of
   * one each (less work on the engine's event loop per action). 0 copies at once. Default 20 ms.
   */
  lingerMs?: number;
  timers?: ForwarderTimers;
}

export interface ForwarderState {
  /** `degraded` from the first failed copy until one succeeds again. */
  status: 'ok' | 'degraded';
  /** Failed attempts in a row. */
  failures: number;
  /** Entries not yet copied. */
  backlog: number;
  error?: string;
}

/**
 * Copies the outbox to a replica in order: reads the oldest entries, applies them in one transaction,
 * acknowledges them, repeats until the outbox is empty. A failed copy is retried with exponential backoff and
 * jitter (nothing is acknowledged, so nothing is lost); replaying is safe because the replica applies
 * idempotently. Wakes on `wake()` after each local write (lingering a moment so bursts share a transaction);
 * while degraded it waits for its retry timer instead, so a down replica is not hammered.
 */
export class OutboxForwarder {
  private readonly logger = new Logger('OutboxForwarder');
  private readonly timers: ForwarderTimers;
  private pumping: Promise<void> | undefined;
  private again = false;
  private retryTimer: unknown;
  private lingerTimer: unknown;
  private failures = 0;
  private lastError: string | undefined;
  private closed = false;

  constructor(
    private readonly outbox: Outbox,
    private readonly target: ReplicaTarget,
    private readonly options: OutboxForwarderOptions = {},
  ) {
    this.timers = options.timers ?? SYSTEM_TIMERS;
  }

  /** Starts copying what the outbox already holds (from before a restart, say). */
  start(): void {
    this.pump();
  }

  /** New entries were committed: copy them soon (at once unless waiting out a failure). */
  wake(): void {
    if (this.closed || this.retryTimer !== undefined || this.lingerTimer !== undefined) return;
    const linger = this.options.lingerMs ?? 20;
    if (linger <= 0) return this.pump();
    this.lingerTimer = this.timers.setTimeout(() => {
      this.lingerTimer = undefined;
      this.pump();
    }, linger);
  }

  /**
   * Reports a failure seen elsewhere (a read from the replica): switches to degraded and lets the retry
   * timer check the replica until it answers again.
   */
  reportFailure(error: unknown): void {
    if (this.closed) return;
    this.failed(error);
  }

  state(): ForwarderState {
    return {
      status: this.failures > 0 ? 'degraded' : 'ok',
      failures: this.failures,
      backlog: this.outbox.outboxSize(),
      ...(this.lastError !== undefined && { error: this.lastError }),
    };
  }

  /** Waits until the outbox is empty, for at most `timeoutMs`; true if it is. */
  async drain(timeoutMs: number): Promise<boolean> {
    const deadline = Date.now() + timeoutMs;
    while (this.outbox.outboxSize() > 0) {
      if (this.closed || Date.now() >= deadline) return false;
      if (this.retryTimer === undefined) this.pump();
      const pause = this.sleep(Math.min(50, deadline - Date.now()));
      await (this.pumping ? Promise.race([this.pumping, pause]) : pause);
    }
    return true;
  }

  /** Stops: no new copies, the one in flight finishes. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    for (const timer of [this.retryTimer, this.lingerTimer]) {
      if (timer !== undefined) this.timers.clearTimeout(timer);
    }
    this.retryTimer = this.lingerTimer = undefined;
    await this.pumping;
  }

  private pump(): void {
    if (this.pumping) {
      this.again = true; // picked up by the running loop, or by a new one right after it
      return;
    }
    this.pumping = this.loop().finally(() => {
      this.pumping = undefined;
      if (this.again && !this.closed && this.retryTimer === undefined) this.pump();
    });
  }

  private async loop(): Promise<void> {
    while (!this.closed) {
      this.again = false;
      let batch: OutboxBatch;
      try {
        batch = this.outbox.outboxBatch(this.options.batchEntries ?? 500, this.options.batchBytes);
      } catch (error) {
        // The local store is closing under us; whatever is left is copied after the next start.
        if (!this.closed) this.logger.error({ msg: 'cannot read the outbox', error: String(error) });
        return;
      }
      try {
        if (batch.entries === 0) {
          // Nothing to copy, but a failure was reported: check the replica is back before saying so.
          if (this.failures > 0) await this.target.ping();
          if (this.failures > 0) this.recovered();
          return;
        }
        await this.target.applyReplica(batch);
      } catch (error) {
        this.failed(error);
        return;
      }
      await this.outbox.outboxAck(batch.lastId);
      if (this.failures > 0) this.recovered();
    }
  }

  private failed(error: unknown): void {
    this.failures++;
    this.lastError = error instanceof Error ? error.message : String(error);
    if (this.failures === 1 || this.failures % 20 === 0) {
      this.logger.warn({
        msg: 'cannot copy the context graph to Neo4j; records wait in the local outbox',
        failures: this.failures,
        backlog: this.outbox.outboxSize(),
        error: this.lastError,
      });
    }
    if (this.closed || this.retryTimer !== undefined) return;
    const delay = retryDelay(this.failures, this.options);
    this.retryTimer = this.timers.setTimeout(() => {
      this.retryTimer = undefined;
      this.pump();
    }, delay);
  }

  private recovered(): void {
    this.logger.log({ msg: 'Neo4j reachable again', failuresBefore: this.failures });
    this.failures = 0;
    this.lastError = undefined;
  }

  private sleep(ms: number): Promise<void> {
    return new Promise((resolve) => this.timers.setTimeout(resolve, Math.max(0, ms)));
  }
}
