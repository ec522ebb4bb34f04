import type { SessionEvent, SessionEvents } from '../../session/events/session-events';

/** Publishes an IOPub message answering the request being handled. */
export type Publish = (msgType: string, content: Record<string, unknown>) => void;

/** Output events that come before their action's id is known (none do: the run starts later); bounded anyway. */
const MAX_EARLY_EVENTS = 1000;
/** Stderr held back as a possible traceback past this many characters is sent after all. */
const MAX_HELD_CHARS = 256 * 1024;
const TRACEBACK = /^Traceback \(most recent call last\):$/m;

/**
 * A cell's live output as Jupyter `stream` messages: the session's `action.output` events of its action, followed
 * from before the action is submitted (`follow` names it) until `stop`.
 *
 * A python kernel prints an uncaught exception's traceback on stderr as it happens; Jupyter clients show it once,
 * in the cell's `error` message. So stderr from a `Traceback (most recent call last):` line on is held back: when
 * the cell ends with that traceback as its error it is dropped (`end(true)`), otherwise it is sent in order (output
 * that follows it, or the end of a cell it did not fail).
 */
export class StreamRelay {
  private actionId?: string;
  private sent = false;
  private readonly early: SessionEvent[] = [];
  private held: string[] = [];
  private heldChars = 0;
  private readonly unsubscribe: () => void;

  constructor(
    events: SessionEvents,
    sessionId: string,
    private readonly publish: Publish,
    private readonly holdTracebacks: boolean,
  ) {
    // After every event buffered so far: no replay, only what comes next.
    this.unsubscribe = events.subscribe(sessionId, Number.MAX_SAFE_INTEGER, {
      onEvent: (e) => {
        if (e.type !== 'action.output') return;
        if (this.actionId !== undefined) this.take(e);
        else if (this.early.length < MAX_EARLY_EVENTS) this.early.push(e);
      },
      onEnd: () => undefined,
    }).unsubscribe;
  }

  /** Whether any output of the action came live. */
  get streamed(): boolean {
    return this.sent || this.held.length > 0;
  }

  follow(actionId: string): void {
    this.actionId = actionId;
    for (const e of this.early.splice(0)) this.take(e);
  }

  /** The cell ended: a held traceback its error message carries is dropped, anything else held is sent. */
  end(tracebackInError: boolean): void {
    this.stop();
    if (!tracebackInError) this.flush();
    this.held = [];
  }

  stop(): void {
    this.unsubscribe();
  }

  private take(e: SessionEvent): void {
    const { actionId, stream, chunk } = e.data;
    if (actionId !== this.actionId || typeof chunk !== 'string') return;
    if (stream === 'stdout') {
      this.flush();
      this.send('stdout', chunk);
    } else if (stream === 'stderr') this.stderr(chunk);
  }

  private stderr(chunk: string): void {
    const at = this.holdTracebacks ? chunk.search(TRACEBACK) : -1;
    if (at < 0) {
      if (this.held.length > 0 && this.heldChars + chunk.length <= MAX_HELD_CHARS) this.hold(chunk);
      else {
        this.flush();
        this.send('stderr', chunk);
      }
      return;
    }
    // A new traceback: what was held before it was not the one the cell ends with.
    this.flush();
    if (at > 0) this.send('stderr', chunk.slice(0, at));
    this.hold(chunk.slice(at));
  }

  private hold(text: string): void {
    this.held.push(text);
    this.heldChars += text.length;
  }

  private flush(): void {
    if (this.held.length === 0) return;
    this.send('stderr', this.held.join(''));
    this.held = [];
    this.heldChars = 0;
  }

  private send(name: 'stdout' | 'stderr', text: string): void {
    this.sent = true;
    this.publish('stream', { name, text });
  }
}
