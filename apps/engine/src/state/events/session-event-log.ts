import { Logger, type OnApplicationShutdown } from '@nestjs/common';
import type { PostgresDb } from '../storage/postgres-db';
import type { SessionEvent } from './session-event';

/** Most events written in one INSERT. */
const BATCH = 500;

/**
 * Replicas' copy of every session's events in Postgres (`session_events`), so the replica that takes a session over
 * continues its ids and replays what a client reconnecting with `Last-Event-ID` missed. Appends are queued and
 * written in order in batches (publishing never waits on Postgres); each session keeps its last `keep` events.
 */
export class SessionEventLog implements OnApplicationShutdown {
  private readonly logger = new Logger('SessionEventLog');
  private queue: { sessionId: string; event: SessionEvent }[] = [];
  private writing?: Promise<void>;
  private failing = false;

  constructor(
    private readonly db: PostgresDb,
    private readonly keep: number,
  ) {}

  append(sessionId: string, event: SessionEvent): void {
    this.queue.push({ sessionId, event });
    this.writing ??= this.drain().finally(() => (this.writing = undefined));
  }

  /** Resolves once every event appended so far is written (or given up on). */
  async flush(): Promise<void> {
    while (this.writing) await this.writing;
  }

  /** The session's last `keep` events, oldest first. */
  async recent(sessionId: string): Promise<SessionEvent[]> {
    await this.flush();
    const rows = await this.db.query<{
      id: string;
      type: SessionEvent['type'];
      at: string;
      data: SessionEvent['data'];
    }>(
      `SELECT id, type, at, data FROM (
         SELECT * FROM session_events WHERE session_id = $1 ORDER BY id DESC LIMIT $2) recent ORDER BY id`,
      [sessionId, this.keep],
    );
    return rows.map((r) => ({ id: Number(r.id), type: r.type, at: r.at, data: r.data }));
  }

  /** Forgets an ended session's events. */
  async drop(sessionId: string): Promise<void> {
    await this.flush();
    await this.db.query('DELETE FROM session_events WHERE session_id = $1', [sessionId]);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.flush();
  }

  private async drain(): Promise<void> {
    while (this.queue.length > 0 && this.db.isOpen) {
      const batch = this.queue.slice(0, BATCH);
      try {
        await this.write(batch);
        this.queue.splice(0, batch.length);
        if (this.failing) this.logger.log('session events are written to Postgres again');
        this.failing = false;
      } catch (err) {
        if (!this.failing)
          this.logger.warn(`cannot write session events to Postgres: ${(err as Error).message}`);
        this.failing = true;
        await new Promise((r) => setTimeout(r, 1000));
      }
    }
  }

  private async write(batch: { sessionId: string; event: SessionEvent }[]): Promise<void> {
    await this.db.query(
      `INSERT INTO session_events (session_id, id, type, at, data)
       SELECT * FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::jsonb[])
       ON CONFLICT DO NOTHING`,
      [
        batch.map((b) => b.sessionId),
        batch.map((b) => b.event.id),
        batch.map((b) => b.event.type),
        batch.map((b) => b.event.at),
        batch.map((b) => JSON.stringify(b.event.data)),
      ],
    );
    // Trim each session written to its last `keep` (ids of a session are dense: one per event).
    const last = new Map<string, number>();
    for (const b of batch) last.set(b.sessionId, b.event.id);
    await this.db.query(
      `DELETE FROM session_events e USING unnest($1::text[], $2::bigint[]) AS t(session_id, last)
       WHERE e.session_id = t.session_id AND e.id <= t.last - $3`,
      [[...last.keys()], [...last.values()], this.keep],
    );
  }
}
