import { randomBytes } from 'node:crypto';
import type { Readable, Writable } from 'node:stream';
import { RunnerTunnel, type TunnelLink } from './runner-tunnel';
import {
  RunnerGoneError,
  RunnerProtocolError,
  RunnerRefusedError,
  RunnerTimeoutError,
} from './runner.errors';
import {
  RUNNER_PROTOCOL,
  type BackChannelTarget,
  type CellDone,
  type CellRequest,
  type InterruptAck,
  type KernelStartRequest,
  type ListeningPort,
  type ProcSignalName,
  type ProcStartRequest,
  type RunnerEvent,
  type RunnerExit,
  type RunnerHello,
  type RunnerPong,
  type RunnerResynced,
  type RunnerRunRequest,
  type RunnerSnapshotRequest,
  type TermOpenRequest,
} from './runner-protocol';

/** Longest line the runner may send (an output event carries at most 64 KiB, base64-encoded). */
// The longest runner message: a kernel's rich result of the largest allowed size (8 MiB, base64: 10.7 MiB).
const MAX_LINE_BYTES = 12 * 1024 * 1024;
/** The most one `term_write` carries (the runner refuses more than 1 MiB). */
const TERM_WRITE_BYTES = 256 * 1024;

interface Pending {
  resolve(message: Record<string, unknown>): void;
  reject(err: Error): void;
  onOutput?: (fd: 1 | 2, data: Buffer, id: number) => void;
  onDisplay?: (result: Record<string, unknown>) => void;
}

export interface RunnerConnectionOptions {
  /**
   * The runner lived on behind another engine's connection, now gone: everything it sends is discarded until it
   * answers `resync` (half a line of the old stream, late answers to the old engine's requests). Call `resync` next.
   */
  resync?: boolean;
}

/** Ids of a resynced connection's requests start here: far above any the old engine used, so none is taken for another. */
const RESYNC_ID_BASE = 2 ** 40;

export interface RunnerStdio {
  stdin: Writable;
  stdout: Readable;
  /** Resolves when the underlying connection is gone. */
  closed: Promise<void>;
  close(): void;
}

/**
 * Engine side of the runner protocol: JSON lines over the runner's stdin/stdout (a pooled container's attached
 * streams, or the pipes of a session's bubblewrap sandbox), requests correlated by id; process and terminal output
 * and exits and kernel deaths arrive unsolicited (`onEvent`), a tunnel's bytes go to its `RunnerTunnel`. Once the
 * connection closes, every pending and later request rejects with `RunnerGoneError` and every tunnel is destroyed.
 */
export class RunnerConnection {
  readonly hello: Promise<RunnerHello>;
  /** Resolves once the connection is closed, for whatever reason. */
  readonly closed: Promise<void>;
  private readonly pending = new Map<number, Pending>();
  private readonly listeners = new Set<(event: RunnerEvent) => void>();
  private readonly tunnels = new Map<string, RunnerTunnel>();
  private incoming?: (tunnel: RunnerTunnel, target: BackChannelTarget) => void;
  private readonly tunnelLink: TunnelLink = {
    tunnelWrite: async (tunnel, data, eof) => {
      const ack = await this.request({ op: 'tunnel_write', tunnel, data: data.toString('base64'), eof })
        .reply;
      return { found: ack.found === true };
    },
    tunnelAck: (tunnel, bytes) => this.write({ op: 'tunnel_ack', tunnel, bytes }),
    tunnelClose: (tunnel) => void this.request({ op: 'tunnel_close', tunnel }).reply.catch(() => undefined),
    forget: (tunnel) => this.tunnels.delete(tunnel),
  };
  private nextId = 1;
  private chunks: Buffer[] = [];
  private chunkBytes = 0;
  private gone?: Error;
  private resolveHello!: (hello: RunnerHello) => void;
  private rejectHello!: (err: Error) => void;
  /** Discarding what the runner sends until its `resynced` with this nonce (`''`: `resync` not sent yet). */
  private resyncing?: { nonce: string; answer?: (message: Record<string, unknown>) => void };

  constructor(
    private readonly stdio: RunnerStdio,
    options: RunnerConnectionOptions = {},
  ) {
    if (options.resync) this.resyncing = { nonce: '' };
    this.hello = new Promise<RunnerHello>((resolve, reject) => {
      this.resolveHello = resolve;
      this.rejectHello = reject;
    });
    this.hello.catch(() => undefined); // observed by whoever awaits it
    stdio.stdout.on('data', (chunk: Buffer) => this.onData(chunk));
    stdio.stdin.on('error', (err) => this.shutdown(new RunnerGoneError(`runner stdin: ${err.message}`)));
    this.closed = stdio.closed.then(() => this.shutdown(new RunnerGoneError('the runner connection closed')));
  }

  get isClosed(): boolean {
    return this.gone !== undefined;
  }

  /** Has the runner fork and exec `/bin/true`; rejects on timeout, close or a failed check. */
  async ping(timeoutMs: number): Promise<RunnerPong> {
    const { id, reply } = this.request({ op: 'ping' });
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(() => {
        this.pending.delete(id);
        reject(new RunnerTimeoutError(`the runner did not answer a health check within ${timeoutMs} ms`));
      }, timeoutMs);
    });
    try {
      const pong = (await Promise.race([reply, timeout])) as unknown as RunnerPong;
      if (!pong.ok) throw new RunnerProtocolError(`health check failed: ${pong.error ?? 'unknown'}`);
      return pong;
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Takes over a live runner (a connection made with `resync: true`): the runner ends what the old connection had
   * under way (fresh run, cells, terminals, tunnels) and answers with the kernels and processes that live on; what
   * came before its answer was discarded. Rejects on timeout, close, or another protocol.
   */
  async resync(timeoutMs: number): Promise<RunnerResynced> {
    if (!this.resyncing || this.resyncing.nonce)
      throw new Error('resync needs a connection made with resync: true');
    const nonce = randomBytes(16).toString('hex');
    const answered = new Promise<Record<string, unknown>>((resolve) => {
      this.resyncing = { nonce, answer: resolve };
    });
    this.nextId = RESYNC_ID_BASE + randomBytes(4).readUInt32BE(0);
    const id = this.nextId++;
    // The newline first: it ends whatever half request the old engine left in the runner's input.
    if (!this.gone) this.stdio.stdin.write(`\n${JSON.stringify({ op: 'resync', id, nonce })}\n`);
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<never>((_, reject) => {
      timer = setTimeout(
        () => reject(new RunnerTimeoutError(`the runner did not answer a resync within ${timeoutMs} ms`)),
        timeoutMs,
      );
    });
    const gone = this.closed.then(() => {
      throw this.gone ?? new RunnerGoneError('the runner connection closed');
    });
    try {
      const message = await Promise.race([answered, timeout, gone]);
      if (message.protocol !== RUNNER_PROTOCOL) {
        const reason = `runner protocol ${String(message.protocol)}, engine speaks ${RUNNER_PROTOCOL}`;
        this.fail(reason);
        throw new RunnerProtocolError(reason);
      }
      return {
        protocol: message.protocol,
        pid: Number(message.pid),
        ...(Array.isArray(message.workspace) && {
          workspace: [Number(message.workspace[0]), Number(message.workspace[1])] as [number, number],
        }),
        ...(typeof message.error === 'string' && { error: message.error }),
        kernels: Array.isArray(message.kernels) ? (message.kernels as RunnerResynced['kernels']) : [],
        procs: Array.isArray(message.procs) ? (message.procs as RunnerResynced['procs']) : [],
      };
    } finally {
      clearTimeout(timer);
    }
  }

  /** Starts a run; output arrives through `onOutput` (raw bytes, with the run's id) until `exit` resolves. */
  run(
    request: RunnerRunRequest,
    onOutput: (fd: 1 | 2, data: Buffer, id: number) => void,
  ): { id: number; exit: Promise<RunnerExit> } {
    const { id, reply } = this.request({ op: 'run', ...request }, onOutput);
    return { id, exit: reply as Promise<unknown> as Promise<RunnerExit> };
  }

  /** Asks the runner to end run `id` (kills everything it started). Fire and forget. */
  kill(id: number): void {
    this.write({ op: 'kill', id });
  }

  /** Starts a kernel; resolves once it is ready (the runner waits at most 10 s), or rejects with its stderr. */
  async kernelStart(request: KernelStartRequest): Promise<{ pid: number }> {
    const ready = await this.request({ op: 'kernel_start', ...request }).reply;
    return { pid: ready.pid as number };
  }

  /**
   * Runs a cell; its output arrives through `onOutput` and its rich results (MIME bundles, in order) through
   * `onDisplay` until `done` resolves (refusals: `no_kernel`, `busy`).
   */
  cell(
    request: CellRequest,
    onOutput: (fd: 1 | 2, data: Buffer, id: number) => void,
    onDisplay?: (result: Record<string, unknown>) => void,
  ): { id: number; done: Promise<CellDone> } {
    const { id, reply } = this.request({ op: 'cell', ...request }, onOutput, onDisplay);
    return { id, done: reply as Promise<unknown> as Promise<CellDone> };
  }

  /** SIGINT to the kernel's process group, if a cell runs; the cell then ends with `interrupted`. */
  async kernelInterrupt(kernel: string): Promise<InterruptAck> {
    const ack = await this.request({ op: 'kernel_interrupt', kernel }).reply;
    return { found: ack.found === true, running: ack.running === true };
  }

  /** Kills the kernel's whole tree; a running cell ends with `stateLost`, then `kernel_exit` follows. */
  async kernelStop(kernel: string): Promise<{ found: boolean }> {
    const ack = await this.request({ op: 'kernel_stop', kernel }).reply;
    return { found: ack.found === true };
  }

  async procStart(request: ProcStartRequest): Promise<{ pid: number }> {
    const started = await this.request({ op: 'proc_start', ...request }).reply;
    return { pid: started.pid as number };
  }

  /** Queues `data` for the process's stdin, then closes it when `eof` (refusal `closed`: it already is). */
  async procWrite(proc: string, data: string, eof = false): Promise<{ found: boolean }> {
    const ack = await this.request({ op: 'proc_write', proc, data, eof }).reply;
    return { found: ack.found === true };
  }

  /** Signals every process of the background process's tree. */
  async procSignal(proc: string, signal: ProcSignalName): Promise<{ found: boolean }> {
    const ack = await this.request({ op: 'proc_signal', proc, signal }).reply;
    return { found: ack.found === true };
  }

  /**
   * Starts the runner's egress forwarder (127.0.0.1:3128 → the session's proxy socket in /run/switchyard-egress), for
   * a container claimed by a session with network; the runner keeps it running. Refusal `egress`: no such directory.
   */
  async egress(): Promise<{ pid: number }> {
    const ack = await this.request({ op: 'egress' }).reply;
    return { pid: ack.pid as number };
  }

  /**
   * A TCP connection to `port` on the box's loopback (127.0.0.1, then ::1), as a stream; rejects with
   * `RunnerRefusedError` code `connect` when nothing accepts connections there (`tunnel_limit`: the box has 256).
   */
  async openTunnel(port: number): Promise<RunnerTunnel> {
    const id = `tun_${randomBytes(8).toString('hex')}`;
    // Registered first: its first bytes may arrive in the same read as the answer, before this function resumes.
    const tunnel = new RunnerTunnel(id, this.tunnelLink);
    this.tunnels.set(id, tunnel);
    try {
      const opened = await this.request({ op: 'tunnel_open', tunnel: id, port }).reply;
      tunnel.onOpened(nullableString(opened.proc), nullableString(opened.kernel));
      return tunnel;
    } catch (err) {
      this.tunnels.delete(id);
      tunnel.onGone(err as Error);
      throw err;
    }
  }

  /**
   * Has the runner listen on an abstract socket of the box for `kind` (`call`: run `run`'s, until `channelClose`;
   * `egress`: the box's one, with the egress forwarder towards it); answers its name (`@…`). Each connection there
   * comes as a tunnel to `onIncomingTunnel`'s handler.
   */
  async channelOpen(kind: 'egress' | 'call', run?: string): Promise<string> {
    const opened = await this.request({ op: 'channel_open', kind, ...(run !== undefined && { run }) }).reply;
    return String(opened.socket);
  }

  /** The call socket of run `run` goes (its tunnels stay). */
  async channelClose(run: string): Promise<{ found: boolean }> {
    const ack = await this.request({ op: 'channel_close', run }).reply;
    return { found: ack.found === true };
  }

  /**
   * Takes the tunnels the runner opens (`tunnel_in`), one handler per connection; without one they are closed. The
   * target is what the runner says the box's code connected to: the handler decides what that means.
   */
  onIncomingTunnel(handler: (tunnel: RunnerTunnel, target: BackChannelTarget) => void): void {
    this.incoming = handler;
  }

  /**
   * Starts a terminal: a login shell (or `command`) on a pseudo-terminal of the given size. Its output and end come
   * as `tout` and `texit` events (refusals: `exists`, `cwd`, `workspace`, `term_start`, `term_limit`).
   */
  async termOpen(request: TermOpenRequest): Promise<{ pid: number }> {
    const started = await this.request({ op: 'term_open', ...request }).reply;
    return { pid: started.pid as number };
  }

  /**
   * Types `data` into the terminal, in pieces of at most 256 KiB. Each is acknowledged once less than 1 MiB of input
   * waits for the terminal, so awaiting this is the backpressure of a paste into a program that does not read.
   */
  async termWrite(term: string, data: Buffer): Promise<{ found: boolean }> {
    for (let at = 0; at < data.length || at === 0; at += TERM_WRITE_BYTES) {
      const piece = data.subarray(at, at + TERM_WRITE_BYTES);
      const ack = await this.request({ op: 'term_write', term, data: piece.toString('base64') }).reply;
      if (ack.found !== true) return { found: false };
      if (at + TERM_WRITE_BYTES >= data.length) break;
    }
    return { found: true };
  }

  /** Sets the terminal's window size (its foreground program gets SIGWINCH). */
  async termResize(term: string, cols: number, rows: number): Promise<{ found: boolean }> {
    const ack = await this.request({ op: 'term_resize', term, cols, rows }).reply;
    return { found: ack.found === true };
  }

  /** Hangs the terminal up (SIGHUP); what still runs a second later is killed. `texit` follows. */
  async termClose(term: string): Promise<{ found: boolean }> {
    const ack = await this.request({ op: 'term_close', term }).reply;
    return { found: ack.found === true };
  }

  /**
   * The workspace's files and links, walked in the runner's own process (no process started). Resolves to the
   * workspace tool's answer (`{ok, snapshot}` or `{ok: false, error}`, libs/workspace's workspace-tool.protocol.ts);
   * refusals: `workspace`, `snapshot_size` (the answer would be over 4 MiB).
   */
  async snapshot(request: RunnerSnapshotRequest): Promise<Record<string, unknown>> {
    const { ev: _ev, id: _id, ...answer } = await this.request({ op: 'snapshot', ...request }).reply;
    return answer;
  }

  /** The TCP sockets in LISTEN in the box, and the process or kernel holding each (null: not one of the runner's). */
  async listPorts(): Promise<ListeningPort[]> {
    const answer = await this.request({ op: 'ports' }).reply;
    const ports = Array.isArray(answer.ports) ? (answer.ports as Array<Record<string, unknown>>) : [];
    return ports.map((p) => ({
      port: Number(p.port),
      address: String(p.address),
      proc: nullableString(p.proc),
      kernel: nullableString(p.kernel),
    }));
  }

  /**
   * Listens to the runner's unsolicited events (process and terminal output and exits, kernel deaths); returns the
   * unsubscribe.
   * A listener that throws does not disturb the connection or the other listeners.
   */
  onEvent(listener: (event: RunnerEvent) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  close(): void {
    this.stdio.close();
    this.shutdown(new RunnerGoneError('the runner connection was closed by the engine'));
  }

  private request(
    message: Record<string, unknown>,
    onOutput?: Pending['onOutput'],
    onDisplay?: Pending['onDisplay'],
  ): { id: number; reply: Promise<Record<string, unknown>> } {
    const id = this.nextId++;
    const reply = new Promise<Record<string, unknown>>((resolve, reject) => {
      if (this.gone) return reject(this.gone);
      this.pending.set(id, { resolve, reject, onOutput, onDisplay });
    });
    reply.catch(() => undefined); // observed by the caller
    this.write({ ...message, id });
    return { id, reply };
  }

  private write(message: Record<string, unknown>): void {
    if (this.gone) return;
    this.stdio.stdin.write(`${JSON.stringify(message)}\n`);
  }

  private onData(chunk: Buffer): void {
    let start = 0;
    for (let nl = chunk.indexOf(0x0a); nl !== -1; nl = chunk.indexOf(0x0a, start)) {
      const piece = chunk.subarray(start, nl);
      const line = this.chunks.length === 0 ? piece : Buffer.concat([...this.chunks, piece]);
      this.chunks = [];
      this.chunkBytes = 0;
      start = nl + 1;
      this.onLine(line);
      if (this.gone) return;
    }
    if (start < chunk.length) {
      this.chunks.push(chunk.subarray(start));
      this.chunkBytes += chunk.length - start;
      if (this.chunkBytes > MAX_LINE_BYTES) this.fail(`a runner message is over ${MAX_LINE_BYTES} bytes`);
    }
  }

  private onLine(line: Buffer): void {
    if (line.length === 0) return;
    if (this.resyncing) return this.onLineResyncing(line);
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line.toString('utf8')) as Record<string, unknown>;
    } catch {
      return this.fail(
        `the runner sent something that is not JSON: ${line.subarray(0, 80).toString('utf8')}`,
      );
    }
    const ev = message.ev;
    if (ev === 'pout' || ev === 'pexit' || ev === 'kernel_exit' || ev === 'tout' || ev === 'texit') {
      return this.emit(message);
    }
    if (ev === 'tdata' || ev === 'tend' || ev === 'tclosed') return this.onTunnel(message);
    if (ev === 'tunnel_in') return this.onTunnelIn(message);
    if (ev === 'hello') {
      if (message.protocol !== RUNNER_PROTOCOL) {
        return this.fail(`runner protocol ${String(message.protocol)}, engine speaks ${RUNNER_PROTOCOL}`);
      }
      return this.resolveHello(message as unknown as RunnerHello);
    }
    const pending = typeof message.id === 'number' ? this.pending.get(message.id) : undefined;
    if (!pending) return; // a late answer to a request given up on (timed-out ping)
    switch (ev) {
      case 'out':
        pending.onOutput?.(
          message.fd === 2 ? 2 : 1,
          Buffer.from(String(message.data), 'base64'),
          message.id as number,
        );
        return;
      case 'display':
        if (message.result !== null && typeof message.result === 'object' && !Array.isArray(message.result)) {
          pending.onDisplay?.(message.result as Record<string, unknown>);
        }
        return;
      case 'pong':
      case 'exit':
      case 'kernel_ready':
      case 'cell_done':
      case 'ack':
      case 'proc_started':
      case 'tunnel_opened':
      case 'term_started':
      case 'ports':
      case 'channel_opened':
      case 'snapshot':
        this.pending.delete(message.id as number);
        return pending.resolve(message);
      case 'error':
        this.pending.delete(message.id as number);
        return pending.reject(
          new RunnerRefusedError(
            `runner refused: ${String(message.message)}`,
            typeof message.code === 'string' ? message.code : undefined,
            Array.isArray(message.workspace)
              ? [String(message.workspace[0]), String(message.workspace[1])]
              : undefined,
          ),
        );
      default:
        return this.fail(`unknown runner event ${JSON.stringify(ev)}`);
    }
  }

  /** Before the `resynced` answer: nothing counts, not even what is not JSON (the old stream's half line). */
  private onLineResyncing(line: Buffer): void {
    const resyncing = this.resyncing!;
    let message: Record<string, unknown>;
    try {
      message = JSON.parse(line.toString('utf8')) as Record<string, unknown>;
    } catch {
      return;
    }
    if (message.ev !== 'resynced' || !resyncing.nonce || message.nonce !== resyncing.nonce) return;
    this.resyncing = undefined;
    resyncing.answer?.(message);
  }

  private onTunnel(message: Record<string, unknown>): void {
    const tunnel = this.tunnels.get(String(message.tunnel));
    if (!tunnel) return; // destroyed on this side already
    if (message.ev === 'tdata') tunnel.onData(Buffer.from(String(message.data), 'base64'));
    else if (message.ev === 'tend') tunnel.onServerEnd();
    else {
      this.tunnels.delete(tunnel.id);
      tunnel.onSocketClosed(typeof message.error === 'string' ? message.error : undefined);
    }
  }

  private onTunnelIn(message: Record<string, unknown>): void {
    const id = String(message.tunnel);
    const tunnel = new RunnerTunnel(id, this.tunnelLink);
    this.tunnels.set(id, tunnel);
    tunnel.onOpened(null, null);
    const target = message.target === 'egress' || message.target === 'call' ? message.target : undefined;
    if (!this.incoming || !target) return void tunnel.destroy();
    this.incoming(tunnel, { target, run: typeof message.run === 'string' ? message.run : null });
  }

  private emit(message: Record<string, unknown>): void {
    let event = message as unknown as RunnerEvent;
    if (message.ev === 'pout') {
      event = {
        ...message,
        fd: message.fd === 2 ? 2 : 1,
        data: Buffer.from(String(message.data), 'base64'),
      } as unknown as RunnerEvent;
    } else if (message.ev === 'tout') {
      event = { ...message, data: Buffer.from(String(message.data), 'base64') } as unknown as RunnerEvent;
    }
    for (const listener of this.listeners) {
      try {
        listener(event);
      } catch {
        // the listener's own failure; the protocol goes on
      }
    }
  }

  private fail(reason: string): void {
    this.stdio.close();
    this.shutdown(new RunnerProtocolError(reason));
  }

  private shutdown(err: Error): void {
    if (this.gone) return;
    this.gone = err;
    this.rejectHello(err);
    for (const p of this.pending.values()) p.reject(err);
    this.pending.clear();
    const tunnels = [...this.tunnels.values()];
    this.tunnels.clear();
    for (const tunnel of tunnels) tunnel.onGone(err);
  }
}

function nullableString(value: unknown): string | null {
  return typeof value === 'string' ? value : null;
}
