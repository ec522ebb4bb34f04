import type { SessionEvent, SessionEventType } from '../../state/events/session-event';

export type { SessionEvent, SessionEventType };

export interface SessionEventListener {
  onEvent(event: SessionEvent): void;
  /** The session ended: no more events will come. */
  onEnd(): void;
}

/**
 * Events a resuming client asked for that the buffer no longer holds: ids `firstMissingId` to `lastMissingId`. The
 * stream says so in an `events.gap` event before its replay, so the client knows to re-read what they reported.
 */
export interface EventGap {
  firstMissingId: number;
  lastMissingId: number;
}

interface Stream {
  nextId: number;
  buffer: SessionEvent[];
  listeners: Set<SessionEventListener>;
}

/**
 * Per-session event streams with a bounded replay buffer. A client reconnecting with `Last-Event-ID` gets every
 * event after it that is still buffered, then live ones. Memory is bounded by `bufferSize` events per live session;
 * a session's stream goes when the session ends.
 */
export class SessionEvents {
  private readonly streams = new Map<string, Stream>();

  constructor(
    private readonly bufferSize: number,
    private readonly now: () => Date = () => new Date(),
    /** Sees every event as published (replicas keep them in Postgres, so a successor can resume the ids). */
    private readonly sink?: (sessionId: string, event: SessionEvent) => void,
  ) {}

  /**
   * Starts a session's stream from events another engine published (a replica taking the session over): they are
   * the replay buffer, and the next id follows the last. Does nothing for a stream this engine already has.
   */
  restore(sessionId: string, events: readonly SessionEvent[]): void {
    if (this.streams.has(sessionId)) return;
    const buffer = events.slice(-this.bufferSize);
    this.streams.set(sessionId, {
      nextId: (events.at(-1)?.id ?? 0) + 1,
      buffer,
      listeners: new Set(),
    });
  }

  publish(sessionId: string, type: SessionEventType, data: Record<string, unknown>): SessionEvent {
    const stream = this.stream(sessionId);
    const event: SessionEvent = { id: stream.nextId++, type, at: this.now().toISOString(), data };
    stream.buffer.push(event);
    if (stream.buffer.length > this.bufferSize)
      stream.buffer.splice(0, stream.buffer.length - this.bufferSize);
    this.sink?.(sessionId, event);
    for (const listener of stream.listeners) {
      try {
        listener.onEvent(event);
      } catch {
        // A broken subscriber must not break the action that published.
      }
    }
    return event;
  }

  /**
   * Replays buffered events with an id above `afterId` (all buffered ones when undefined), then calls `listener`
   * for every new event until the returned function is called. `gap` names the events after `afterId` that were
   * already dropped from the buffer, when there are any.
   */
  subscribe(
    sessionId: string,
    afterId: number | undefined,
    listener: SessionEventListener,
  ): { replay: SessionEvent[]; gap?: EventGap; unsubscribe: () => void } {
    const stream = this.stream(sessionId);
    const replay = stream.buffer.filter((e) => afterId === undefined || e.id > afterId);
    const oldest = stream.buffer[0]?.id ?? stream.nextId;
    const gap =
      afterId !== undefined && afterId + 1 < oldest
        ? { firstMissingId: afterId + 1, lastMissingId: oldest - 1 }
        : undefined;
    stream.listeners.add(listener);
    return { replay, ...(gap && { gap }), unsubscribe: () => stream.listeners.delete(listener) };
  }

  /** Drops the session's stream and tells its subscribers. */
  end(sessionId: string): void {
    const stream = this.streams.get(sessionId);
    if (!stream) return;
    this.streams.delete(sessionId);
    for (const l of stream.listeners) l.onEnd();
  }

  /** Ends every stream (engine shutdown); answers how many had listeners. */
  endAll(): number {
    const open = [...this.streams.values()].filter((s) => s.listeners.size > 0).length;
    for (const id of [...this.streams.keys()]) this.end(id);
    return open;
  }

  private stream(sessionId: string): Stream {
    let s = this.streams.get(sessionId);
    if (!s) {
      s = { nextId: 1, buffer: [], listeners: new Set() };
      this.streams.set(sessionId, s);
    }
    return s;
  }
}
