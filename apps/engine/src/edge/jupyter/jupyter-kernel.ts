import type { Language } from '@switchyard/common';
import { randomUUID } from 'node:crypto';
import type { KernelspecName } from './jupyter-kernelspecs';
import type { JupyterMessage } from './jupyter-messages';

/** One `channels` WebSocket of a kernel: where its messages go. */
export interface JupyterPeer {
  send(message: JupyterMessage): void;
  close(code: number, reason: string): void;
}

/** Shell requests a kernel holds waiting for their turn; past this, a request is answered at once with an error. */
export const MAX_QUEUED_REQUESTS = 64;

/**
 * A Jupyter kernel: a handle, under a UUID of its own, onto the session's kernel of one language (the interpreter
 * `state: "session"` code actions of that language run in). It keeps what Jupyter clients see of a kernel: its
 * WebSocket connections, the shell requests waiting for their turn (one at a time, as a kernel's shell runs them),
 * and whether it is busy. The state lives in the session kernel, shared with the REST API and MCP.
 */
export class JupyterKernel {
  /** The Jupyter session id the kernel's own messages carry. */
  readonly session = randomUUID();
  private readonly peers = new Set<JupyterPeer>();
  /** The action of the cell running now: an interrupt cancels it when it has not reached its kernel yet. */
  currentActionId?: string;
  /** The session kernel's execution count as last seen: what a cell that ran nowhere (refused) answers. */
  executionCount = 0;
  private lastActivity: Date;
  private working = 0;
  private queued = 0;
  private enqueued = 0;
  private abortedThrough = 0;
  private tail: Promise<void> = Promise.resolve();
  private endedFor?: string;

  constructor(
    readonly id: string,
    readonly name: KernelspecName,
    readonly language: Language,
    readonly sessionId: string,
    readonly tenant: string,
    private readonly now: () => Date,
    /** The timeout of its cells (`KERNEL_SWITCHYARD_TIMEOUT_MS`); absent: the engine's default. */
    readonly cellTimeoutMs?: number,
  ) {
    this.lastActivity = now();
  }

  get connections(): number {
    return this.peers.size;
  }

  get busy(): boolean {
    return this.working > 0;
  }

  get lastActivityAt(): string {
    return this.lastActivity.toISOString();
  }

  attach(peer: JupyterPeer): void {
    this.peers.add(peer);
  }

  detach(peer: JupyterPeer): void {
    this.peers.delete(peer);
  }

  /** Sends to every connection: what a kernel publishes on IOPub, every client of it sees. */
  publish(message: JupyterMessage): void {
    for (const peer of this.peers) peer.send(message);
  }

  /** Deleted (or its session ended): requests still waiting are dropped, and no connection is taken. */
  get ended(): boolean {
    return this.endedFor !== undefined;
  }

  /** Ends the kernel: every connection is closed, with `reason`. */
  end(code: number, reason: string): void {
    this.endedFor ??= reason;
    for (const peer of [...this.peers]) peer.close(code, reason);
    this.peers.clear();
  }

  /**
   * Runs `work` after the shell requests before it, one at a time; `work` gets its place in line (see `aborted`).
   * False when MAX_QUEUED_REQUESTS already wait.
   */
  enqueue(work: (seq: number) => Promise<void>): boolean {
    if (this.queued >= MAX_QUEUED_REQUESTS) return false;
    const seq = ++this.enqueued;
    this.queued++;
    this.tail = this.tail
      .then(() => work(seq))
      .catch(() => undefined)
      .finally(() => this.queued--);
    return true;
  }

  /** A cell failed: the execute requests waiting now are answered `aborted` (their `stop_on_error`), as Jupyter does. */
  abortWaiting(): void {
    this.abortedThrough = this.enqueued;
  }

  /** Whether the request at `seq` was waiting when a cell before it failed. */
  aborted(seq: number): boolean {
    return seq <= this.abortedThrough;
  }

  /** Marks a request being handled (busy) until the returned function is called. */
  begin(): () => void {
    this.working++;
    this.lastActivity = this.now();
    let ended = false;
    return () => {
      if (ended) return;
      ended = true;
      this.working--;
      this.lastActivity = this.now();
    };
  }
}
