import { randomBytes } from 'node:crypto';
import { Logger } from '@nestjs/common';
import { type Clock, type ErrorKind, InvalidInputError, NotFoundError } from '@switchyard/common';
import { type RunnerEvent, type TermExitEvent, type TermOutputEvent } from '../runner/runner-protocol';
import { RunnerRefusedError } from '../runner/runner.errors';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../sandbox.errors';
import type { StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type { StatefulTier, TerminalEndReason, TerminalInfo, TerminalOpen } from './stateful.types';
import { TerminalScrollback } from './terminal-scrollback';

export interface SessionTerminalsOptions {
  /** Open terminals a session may have at once. */
  maxPerSession: number;
  /** How the setting for `maxPerSession` is named in refusals. */
  maxPerSessionSetting: string;
  /** A terminal with no client attached and no output this long is closed. */
  idleMs: number;
  /** Output kept per open terminal, replayed to a client that attaches. */
  scrollbackBytes: number;
  /** Ended terminals kept per session for `list`/`get` (the oldest go first). Default 32. */
  endedKept?: number;
  /** After `close` asks the runner, how long to wait for the terminal's exit before taking it for gone. 5 s. */
  closeWaitMs?: number;
}

/** A session at its limit of open terminals: refused, naming the setting (HTTP 429: close one, then retry). */
export class TerminalLimitError extends SandboxError {
  readonly code = 'TERMINAL_LIMIT';
  readonly kind: ErrorKind = 'rate_limited';
  override readonly retriable = true;
}

/** The terminal has ended: it takes no input, resize or client any more (HTTP 409). */
export class TerminalClosedError extends SandboxError {
  readonly code = 'TERMINAL_CLOSED';
  readonly kind: ErrorKind = 'conflict';
}

/** A terminal id as the engine makes them (and accepts from a caller that made one ahead). */
export const TERMINAL_ID = /^trm_[0-9a-f]{16}$/;
export const newTerminalId = (): string => `trm_${randomBytes(8).toString('hex')}`;

/** Where a terminal's output goes: one attached client (a WebSocket). Called synchronously, in order. */
export interface TerminalClient {
  /** Output, as the PTY wrote it. */
  output(data: Buffer): void;
  /** The terminal ended; no more output follows. */
  ended(info: TerminalInfo): void;
}

/** An attached client's view: what it missed (the scrollback), and how to let go. */
export interface TerminalAttachment {
  info: TerminalInfo;
  scrollback: Buffer;
  detach(): void;
}

/** What the terminals report as it happens (the engine records the ends). */
export interface TerminalListener {
  terminalEnded?(info: TerminalInfo): void;
}

/** What `TERM` a terminal's programs see: what xterm.js and every common emulator speak. */
const TERM = 'xterm-256color';

interface Entry {
  info: TerminalInfo;
  box: StatefulBox;
  scrollback: TerminalScrollback;
  clients: Set<TerminalClient>;
  /** Monotonic time of the last output or client activity: the idle clock. */
  lastActivity: number;
  exited: Promise<void>;
  markExited: () => void;
  unpin: () => void;
  /** A close under way (asked, waiting for the exit): a second close joins it. */
  closing?: Promise<TerminalInfo>;
}

/**
 * The terminals of every session: PTYs running a login bash in the session's stateful box (where its kernels,
 * processes and servers are), driven by clients that attach and detach (the terminal WebSocket). Each terminal keeps
 * its last output in a bounded scrollback, replayed to a client that attaches, so a reconnect shows the screen it
 * left; output goes to every attached client, and any of them may type. A terminal ends when its shell exits, when it
 * is closed, after `idleMs` with no client attached and no output, with its box, and with its session. It pins its
 * box while open (a pooled container is not reclaimed under it). Its output is not redacted: it is a person's own
 * screen, streamed as typed (redaction would hold back each keystroke's echo until a line ends).
 */
export class SessionTerminals {
  private readonly logger = new Logger(SessionTerminals.name);
  private readonly hosts = new Map<StatefulTier, StatefulBoxHost>();
  private readonly sessions = new Map<string, Map<string, Entry>>();
  /** Opens under way, per session: each holds a slot of the limit until it is registered or fails. */
  private readonly opening = new Map<string, Set<string>>();
  private readonly watchedBoxes = new WeakSet<StatefulBox>();
  /** Output and exits of terminals the runner started before `open` registered them (the prompt comes at once). */
  private readonly early = new Map<string, Array<TermOutputEvent | TermExitEvent>>();
  private readonly listeners: TerminalListener[] = [];
  private sweeper?: NodeJS.Timeout;
  private closed = false;

  constructor(
    hosts: StatefulBoxHost[],
    private readonly options: SessionTerminalsOptions,
    private readonly clock: Clock,
  ) {
    for (const host of hosts) this.hosts.set(host.tier, host);
  }

  listen(listener: TerminalListener): void {
    this.listeners.push(listener);
  }

  /** Fails fast, before a box is opened, for a session at its limit (opens under way count). */
  checkOpen(sessionId: string): void {
    const open = this.openCount(sessionId);
    if (open >= this.options.maxPerSession) {
      throw new TerminalLimitError(
        `the session already has ${open} open terminals (the limit); close one or raise ` +
          this.options.maxPerSessionSetting,
        { limit: this.options.maxPerSession, retryAfterSeconds: 1 },
      );
    }
  }

  /** Opens a terminal: the session's box (opened if needed), then a PTY in it. */
  async open(spec: TerminalOpen): Promise<TerminalInfo> {
    if (this.closed) throw new SandboxUnavailableError('the engine is shutting down');
    const host = this.hosts.get(spec.tier);
    if (!host) throw new SandboxUnavailableError(`the ${spec.tier} tier holds no terminals in this engine`);
    const id = spec.id ?? newTerminalId();
    if (!TERMINAL_ID.test(id)) throw new InvalidInputError('id', 'a terminal id is trm_ and 16 hex digits');
    if (this.find(spec.sessionId, id) || this.opening.get(spec.sessionId)?.has(id)) {
      throw new InvalidInputError('id', `terminal ${id} already exists in this session`, 'TERMINAL_EXISTS');
    }
    this.checkOpen(spec.sessionId);
    let pending = this.opening.get(spec.sessionId);
    if (!pending) this.opening.set(spec.sessionId, (pending = new Set()));
    pending.add(id);
    try {
      return await this.launch(id, spec, host);
    } finally {
      pending.delete(id);
      if (pending.size === 0 && this.opening.get(spec.sessionId) === pending)
        this.opening.delete(spec.sessionId);
    }
  }

  private async launch(id: string, spec: TerminalOpen, host: StatefulBoxHost): Promise<TerminalInfo> {
    const box = await host.box(spec.sessionId, spec.workspaceDir, spec.egress, spec.image);
    this.watch(box);
    let pid: number;
    this.early.set(id, []);
    try {
      ({ pid } = await box.connection.termOpen({
        term: id,
        cols: spec.cols,
        rows: spec.rows,
        cwd: spec.cwd ?? '.',
        env: { ...spec.baseEnv, ...spec.env, TERM },
        workspace: box.workspace,
        ...(spec.command !== undefined && { command: spec.command }),
      }));
    } catch (err) {
      this.early.delete(id);
      if (err instanceof RunnerRefusedError && err.code === 'cwd') {
        throw new InvalidInputError('cwd', err.message.replace(/^runner refused: /, ''), 'INVALID_CWD');
      }
      if (err instanceof RunnerRefusedError && err.code === 'term_limit') {
        throw new TerminalLimitError(`the sandbox holds no more terminals: ${err.message}`, {
          retryAfterSeconds: 1,
        });
      }
      throw new SandboxInternalError(
        'TERMINAL_START',
        `could not open the terminal: ${(err as Error).message}`,
        {
          retriable: !(err instanceof RunnerRefusedError),
          cause: err,
        },
      );
    }
    let markExited!: () => void;
    const exited = new Promise<void>((resolve) => (markExited = resolve));
    const entry: Entry = {
      info: {
        id,
        sessionId: spec.sessionId,
        tier: spec.tier,
        status: 'open',
        cols: spec.cols,
        rows: spec.rows,
        cwd: spec.cwd ?? '',
        ...(spec.command !== undefined && { command: spec.command }),
        pid,
        createdAt: this.clock.now().toISOString(),
        bytesIn: 0,
        bytesOut: 0,
        clients: 0,
      },
      box,
      scrollback: new TerminalScrollback(this.options.scrollbackBytes),
      clients: new Set(),
      lastActivity: this.clock.monotonic(),
      exited,
      markExited,
      unpin: box.pin(),
    };
    let terminals = this.sessions.get(spec.sessionId);
    if (!terminals) this.sessions.set(spec.sessionId, (terminals = new Map<string, Entry>()));
    terminals.set(id, entry);
    this.startSweeper();
    const early = this.early.get(id) ?? [];
    this.early.delete(id);
    for (const event of early) this.onEvent(box, event);
    return this.view(entry);
  }

  list(sessionId: string): TerminalInfo[] {
    return [...(this.sessions.get(sessionId)?.values() ?? [])].map((e) => this.view(e));
  }

  /** A terminal of the session, open or ended; 404 when it never had it (or it was dropped from the ended ones). */
  get(sessionId: string, id: string): TerminalInfo {
    return this.view(this.entry(sessionId, id));
  }

  /** An open terminal of the session: 404 when it never had it, 409 once it has ended. */
  getOpen(sessionId: string, id: string): TerminalInfo {
    return this.view(this.openEntry(sessionId, id));
  }

  /** Tiers in which the session has an open terminal. */
  liveTiers(sessionId: string): StatefulTier[] {
    const entries = [...(this.sessions.get(sessionId)?.values() ?? [])];
    return [...new Set(entries.flatMap((e) => (e.info.status === 'open' ? [e.info.tier] : [])))];
  }

  /**
   * Attaches a client: answers the scrollback (what it would have seen) and from then on passes it every output, in
   * order, with nothing lost or repeated between the two. 409 for an ended terminal.
   */
  attach(sessionId: string, id: string, client: TerminalClient): TerminalAttachment {
    const entry = this.openEntry(sessionId, id);
    entry.clients.add(client);
    entry.info.clients = entry.clients.size;
    entry.lastActivity = this.clock.monotonic();
    let attached = true;
    return {
      info: this.view(entry),
      scrollback: entry.scrollback.snapshot(),
      detach: () => {
        if (!attached) return;
        attached = false;
        entry.clients.delete(client);
        entry.info.clients = entry.clients.size;
        // The idle clock starts when the last client leaves, not at the last output before.
        entry.lastActivity = this.clock.monotonic();
      },
    };
  }

  /** Types `data` into the terminal (as keystrokes: the PTY's line discipline sees it). */
  async write(sessionId: string, id: string, data: Buffer): Promise<void> {
    const entry = this.openEntry(sessionId, id);
    if (data.length === 0) return;
    entry.info.bytesIn += data.length;
    entry.lastActivity = this.clock.monotonic();
    const { found } = await entry.box.connection.termWrite(id, data);
    if (!found) throw this.closedError(entry);
  }

  /** Sets the terminal's size (the PTY's window size: its programs get SIGWINCH). */
  async resize(sessionId: string, id: string, cols: number, rows: number): Promise<TerminalInfo> {
    const entry = this.openEntry(sessionId, id);
    const { found } = await entry.box.connection.termResize(id, cols, rows);
    if (!found) throw this.closedError(entry);
    entry.info.cols = cols;
    entry.info.rows = rows;
    return this.view(entry);
  }

  /**
   * Closes the terminal: SIGHUP to its process group, its tree killed a second later (the runner's part); answers
   * once it has ended. An ended terminal answers 409.
   */
  async close(sessionId: string, id: string, reason: TerminalEndReason = 'closed'): Promise<TerminalInfo> {
    const entry = this.openEntry(sessionId, id);
    return this.end(entry, reason);
  }

  /** The session ended: its terminals are closed and forgotten. */
  async releaseSession(sessionId: string): Promise<void> {
    const terminals = this.sessions.get(sessionId);
    if (!terminals) return;
    const open = [...terminals.values()].filter((e) => e.info.status === 'open');
    await Promise.allSettled(open.map((e) => this.end(e, 'session_ended', 1000)));
    this.sessions.delete(sessionId);
  }

  /** Shutdown: no terminal opens after this; the tiers kill the boxes (and the shells in them). */
  shutdown(): void {
    this.closed = true;
    this.stopSweeper();
    for (const terminals of this.sessions.values()) {
      for (const e of terminals.values()) {
        if (e.info.status === 'open') this.ended(e, { exitCode: null, signal: 'SIGKILL' }, 'shutdown');
      }
    }
  }

  /**
   * Closes every open terminal that has had no client attached and no output for `idleMs`. Runs on a timer; public
   * so a test with its own clock can run it.
   */
  sweep(): void {
    const now = this.clock.monotonic();
    for (const terminals of this.sessions.values()) {
      for (const e of terminals.values()) {
        if (e.info.status !== 'open' || e.clients.size > 0) continue;
        if (now - e.lastActivity < this.options.idleMs) continue;
        this.logger.log({ msg: 'terminal idle: closed', terminalId: e.info.id, sessionId: e.info.sessionId });
        void this.end(e, 'idle').catch(() => undefined);
      }
    }
  }

  private end(entry: Entry, reason: TerminalEndReason, waitMs?: number): Promise<TerminalInfo> {
    entry.closing ??= this.ending(entry, reason, waitMs);
    return entry.closing;
  }

  private async ending(entry: Entry, reason: TerminalEndReason, waitMs?: number): Promise<TerminalInfo> {
    entry.info.endReason ??= reason;
    await entry.box.connection.termClose(entry.info.id).catch(() => undefined);
    // The runner kills what survives the hangup after a second and reports the exit; a box that reports nothing in
    // time is itself gone or hung, and the terminal with it.
    if (!(await settles(entry.exited, waitMs ?? this.options.closeWaitMs ?? 5000))) {
      this.ended(entry, { exitCode: null, signal: 'SIGKILL' }, reason);
    }
    return this.view(entry);
  }

  private openCount(sessionId: string): number {
    const open = [...(this.sessions.get(sessionId)?.values() ?? [])].filter((e) => e.info.status === 'open');
    return open.length + (this.opening.get(sessionId)?.size ?? 0);
  }

  private find(sessionId: string, id: string): Entry | undefined {
    return this.sessions.get(sessionId)?.get(id);
  }

  private entry(sessionId: string, id: string): Entry {
    const found = this.find(sessionId, id);
    if (!found) throw new NotFoundError(`no terminal "${id}" in session ${sessionId}`, { terminalId: id });
    return found;
  }

  /** The terminal, when it is open; 404 or 409 otherwise. */
  private openEntry(sessionId: string, id: string): Entry {
    const entry = this.entry(sessionId, id);
    if (entry.info.status !== 'open') throw this.closedError(entry);
    return entry;
  }

  private closedError(entry: Entry): TerminalClosedError {
    const { id, endReason, exitCode, signal } = entry.info;
    return new TerminalClosedError(`terminal ${id} has ended (${endWords(entry.info)})`, {
      terminalId: id,
      ...(endReason !== undefined && { endReason }),
      ...(exitCode !== undefined && { exitCode }),
      ...(signal !== undefined && { signal }),
    });
  }

  private view(entry: Entry): TerminalInfo {
    return { ...entry.info };
  }

  /** Output and exits come from the box's runner, for all of its terminals. */
  private watch(box: StatefulBox): void {
    if (this.watchedBoxes.has(box)) return;
    this.watchedBoxes.add(box);
    box.connection.onEvent((event) => this.onEvent(box, event));
    void box.closed.then(() => {
      for (const e of this.sessions.get(box.sessionId)?.values() ?? []) {
        if (e.box === box && e.info.status === 'open')
          this.ended(e, { exitCode: null, signal: 'SIGKILL' }, 'sandbox_lost');
      }
    });
  }

  private onEvent(box: StatefulBox, ev: RunnerEvent): void {
    if (ev.ev !== 'tout' && ev.ev !== 'texit') return;
    const entry = this.find(box.sessionId, ev.term);
    if (!entry || entry.box !== box) {
      this.early.get(ev.term)?.push(ev);
      return;
    }
    if (ev.ev === 'tout') this.output(entry, ev.data);
    else this.ended(entry, { exitCode: ev.exitCode, signal: ev.signal }, 'exited');
  }

  private output(entry: Entry, data: Buffer): void {
    if (entry.info.status !== 'open' || data.length === 0) return;
    entry.info.bytesOut += data.length;
    entry.lastActivity = this.clock.monotonic();
    entry.scrollback.append(data);
    for (const client of entry.clients) this.safely(() => client.output(data));
  }

  private ended(
    entry: Entry,
    exit: { exitCode: number | null; signal: string | null },
    reason: TerminalEndReason,
  ): void {
    if (entry.info.status !== 'open') return;
    entry.info.status = 'closed';
    entry.info.endReason ??= reason;
    entry.info.endedAt = this.clock.now().toISOString();
    if (exit.exitCode !== null) entry.info.exitCode = exit.exitCode;
    if (exit.signal !== null) entry.info.signal = exit.signal;
    entry.unpin();
    entry.markExited();
    // Nobody can attach to it again: its output goes now, not with the session.
    entry.scrollback.clear();
    const info = this.view(entry);
    for (const client of entry.clients) this.safely(() => client.ended(info));
    entry.clients.clear();
    entry.info.clients = 0;
    this.forgetOldest(entry.info.sessionId);
    if (!this.anyOpen()) this.stopSweeper();
    for (const l of this.listeners) this.safely(() => l.terminalEnded?.({ ...info, clients: 0 }));
  }

  /** Keeps the newest `endedKept` ended terminals of the session. */
  private forgetOldest(sessionId: string): void {
    const terminals = this.sessions.get(sessionId);
    if (!terminals) return;
    const ended = [...terminals.values()].filter((e) => e.info.status !== 'open');
    const excess = ended.length - (this.options.endedKept ?? 32);
    for (const e of ended.slice(0, Math.max(0, excess))) terminals.delete(e.info.id);
  }

  private anyOpen(): boolean {
    for (const terminals of this.sessions.values())
      for (const e of terminals.values()) if (e.info.status === 'open') return true;
    return false;
  }

  private startSweeper(): void {
    if (this.sweeper) return;
    // A quarter of the idle time: a terminal is closed at most 25 % late. Never holds the process open.
    const every = Math.max(250, Math.min(30_000, Math.floor(this.options.idleMs / 4)));
    this.sweeper = setInterval(() => this.sweep(), every);
    this.sweeper.unref();
  }

  private stopSweeper(): void {
    clearInterval(this.sweeper);
    this.sweeper = undefined;
  }

  private safely(fn: () => void): void {
    try {
      fn();
    } catch (err) {
      this.logger.warn(`terminal listener failed: ${(err as Error).message}`);
    }
  }
}

function settles(p: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p.then(() => true),
    new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), ms))),
  ]).finally(() => clearTimeout(timer));
}

/** "exit code 0", "signal SIGHUP", "closed: idle". */
export function endWords(info: TerminalInfo): string {
  const status =
    info.exitCode !== undefined
      ? `exit code ${info.exitCode}`
      : info.signal
        ? `signal ${info.signal}`
        : 'ended';
  return info.endReason && info.endReason !== 'exited' ? `${info.endReason}, ${status}` : status;
}
