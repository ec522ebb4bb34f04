import type { SwitchyardClient } from './client';
import type { SessionEvent } from './types';

/** One chunk of output of a process (`process.output`, its log `seq`) or of an action (`action.output`). */
export interface OutputChunk {
  stream: 'stdout' | 'stderr';
  text: string;
  /** A process's log position; absent for an action's output. */
  seq?: number;
}

/** How a process or an action ended, as the stream said (`process.exited`, `action.completed`). */
export interface StreamEnd {
  exitCode?: number;
  signal?: string;
  status?: string;
}

/** What a command handle hears about its process or action. */
export interface StreamListener {
  output(chunk: OutputChunk): void;
  ended(end: StreamEnd): void;
  /** The stream stopped before `ended` (the session ended, the connection failed for good): fall back to polling. */
  lost(): void;
}

/** The event types that carry one process's or action's life, and the id field that names it. */
const KEYS: Partial<Record<SessionEvent['type'], 'processId' | 'actionId'>> = {
  'process.output': 'processId',
  'process.exited': 'processId',
  'action.output': 'actionId',
  'action.completed': 'actionId',
};

/**
 * One SSE subscription per sandbox that routes `process.*` and `action.*` events to the commands waiting for them.
 * A command registers (`expect()`) before it starts its process or action, and attaches by id once the start has
 * answered; events for an id nobody attached yet are held meanwhile, so output emitted before the start's answer
 * is not lost. The stream opens from the last event id it saw (the first time: from the start of the session's
 * buffer), so nothing published between two subscriptions is missed either. It closes when nothing waits.
 */
export class SandboxEvents {
  private readonly listeners = new Map<string, StreamListener>();
  private readonly held = new Map<string, SessionEvent[]>();
  private expecting = 0;
  private abort: AbortController | undefined;
  private lastEventId = 0;

  constructor(
    private readonly client: SwitchyardClient,
    private readonly sessionId: string,
  ) {}

  /** Opens the stream (if closed) before a start; `done()` once the start has answered and the command attached. */
  expect(): { done: () => void } {
    this.expecting++;
    this.open();
    let released = false;
    return {
      done: () => {
        if (released) return;
        released = true;
        if (--this.expecting === 0) this.held.clear();
        this.closeIfIdle();
      },
    };
  }

  /** Routes the events of `id` to `listener` from now on, after those held for it. */
  attach(id: string, listener: StreamListener): void {
    this.listeners.set(id, listener);
    const held = this.held.get(id) ?? [];
    this.held.delete(id);
    for (const event of held) this.deliver(listener, event);
    if (!this.abort) listener.lost();
  }

  detach(id: string): void {
    this.listeners.delete(id);
    this.closeIfIdle();
  }

  /** Stops the stream whatever waits (the sandbox is killed). */
  close(): void {
    this.abort?.abort();
    this.abort = undefined;
  }

  private closeIfIdle(): void {
    if (this.listeners.size === 0 && this.expecting === 0) this.close();
  }

  private open(): void {
    if (this.abort) return;
    const abort = new AbortController();
    this.abort = abort;
    void this.pump(abort).finally(() => {
      if (this.abort === abort) this.abort = undefined;
      if (abort.signal.aborted) return;
      for (const listener of this.listeners.values()) listener.lost();
    });
  }

  private async pump(abort: AbortController): Promise<void> {
    try {
      for await (const event of this.client.events(this.sessionId, {
        signal: abort.signal,
        lastEventId: this.lastEventId,
      })) {
        if (event.id !== undefined) this.lastEventId = event.id;
        const key = KEYS[event.type];
        const id = key === undefined ? undefined : event.data[key];
        if (typeof id !== 'string') continue;
        const listener = this.listeners.get(id);
        if (listener) this.deliver(listener, event);
        else if (this.expecting > 0) this.held.set(id, [...(this.held.get(id) ?? []), event]);
      }
    } catch {
      // A stream that cannot be (re)opened: the listeners fall back to polling (`lost`).
    }
  }

  private deliver(listener: StreamListener, event: SessionEvent): void {
    const d = event.data;
    if (event.type === 'process.output' || event.type === 'action.output') {
      if (typeof d.chunk !== 'string') return;
      listener.output({
        stream: d.stream === 'stderr' ? 'stderr' : 'stdout',
        text: d.chunk,
        ...(typeof d.seq === 'number' && { seq: d.seq }),
      });
    } else {
      listener.ended({
        ...(typeof d.exitCode === 'number' && { exitCode: d.exitCode }),
        ...(typeof d.signal === 'string' && { signal: d.signal }),
        ...(typeof d.status === 'string' && { status: d.status }),
      });
    }
  }
}
