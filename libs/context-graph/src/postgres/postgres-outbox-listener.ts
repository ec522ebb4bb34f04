import { Logger } from '@nestjs/common';
import { Client } from 'pg';
import type { ForwarderTimers } from '../replication/outbox-forwarder';
import { OUTBOX_CHANNEL, redactUrl } from './postgres-outbox';

/**
 * LISTENs on the outbox channel over a connection of its own (a pooled one would be handed to others), so an entry
 * written by any replica wakes this replica's forwarder at once: if the writer dies before forwarding, another
 * replica takes over without waiting for its poll. Reconnects after a lost connection; the forwarder's poll covers
 * the gap, and a reconnect wakes it once for whatever was announced meanwhile.
 */
export class OutboxListener {
  private readonly logger = new Logger('OutboxListener');
  private client: Client | undefined;
  private retryTimer: unknown;
  private stopped = false;
  private lost = false;

  constructor(
    private readonly databaseUrl: string,
    private readonly onNotify: () => void,
    private readonly timers: ForwarderTimers,
    private readonly reconnectMs = 1000,
  ) {}

  /** Connects and listens; a failure is logged and retried in the background (never thrown). */
  async start(): Promise<void> {
    await this.connect();
  }

  /** Stops listening and closes the connection. Idempotent. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retryTimer !== undefined) this.timers.clearTimeout(this.retryTimer);
    this.retryTimer = undefined;
    const client = this.client;
    this.client = undefined;
    await client?.end().catch(() => undefined);
  }

  private async connect(): Promise<void> {
    if (this.stopped) return;
    const client = new Client({
      connectionString: this.databaseUrl,
      application_name: 'switchyard-graph-listener',
      connectionTimeoutMillis: 10_000,
      keepAlive: true,
    });
    client.on('notification', () => this.onNotify());
    client.on('error', (error) => this.dropped(client, error));
    client.on('end', () => this.dropped(client, new Error('connection closed')));
    try {
      await client.connect();
      await client.query(`LISTEN ${OUTBOX_CHANNEL}`);
    } catch (error) {
      await client.end().catch(() => undefined);
      this.scheduleReconnect(error);
      return;
    }
    if (this.stopped) {
      await client.end().catch(() => undefined);
      return;
    }
    this.client = client;
    if (this.lost) {
      this.lost = false;
      this.logger.log({ msg: 'listening for outbox entries again', postgres: redactUrl(this.databaseUrl) });
    }
    this.onNotify(); // entries announced while nobody listened here
  }

  private dropped(client: Client, error: Error): void {
    if (this.client !== client) return; // an old connection, or one being closed by stop()
    this.client = undefined;
    client.end().catch(() => undefined);
    this.scheduleReconnect(error);
  }

  private scheduleReconnect(error: unknown): void {
    if (this.stopped || this.retryTimer !== undefined) return;
    if (!this.lost) {
      this.lost = true; // logged once per outage
      this.logger.warn({
        msg: 'cannot listen for outbox entries; polling until Postgres answers again',
        postgres: redactUrl(this.databaseUrl),
        error: error instanceof Error ? error.message : String(error),
      });
    }
    this.retryTimer = this.timers.setTimeout(() => {
      this.retryTimer = undefined;
      void this.connect();
    }, this.reconnectMs);
  }
}
