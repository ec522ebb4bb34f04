import { Logger } from '@nestjs/common';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as path from 'node:path';

/** One request of a skill's body over its channel (`{"id": n, "op": …}`), and the handler's answer. */
export type ChannelRequest = { op: string } & Record<string, unknown>;
export type ChannelHandler = (request: ChannelRequest) => Promise<Record<string, unknown>>;

/** A request line longer than this is refused (inputs and outputs travel whole). */
const MAX_LINE_BYTES = 16 * 1024 * 1024;
/** Calls one body may have under way at once; more wait their turn. */
const MAX_IN_FLIGHT = 4;

/**
 * The engine's end of a skill's channel: a Unix socket (`call.sock`, in a directory of its own that only the action's
 * sandbox sees) speaking JSON lines — `{"id", "op", …}` in, `{"id", "ok", …}` out, answers in any order. Opened
 * when the body starts, closed (sockets, directory) when it ends. Never a network port.
 */
export class SkillChannel {
  private readonly logger = new Logger('Skills');
  private readonly servers = new Map<string, net.Server>();
  private readonly clients = new Set<net.Socket>();
  private inFlight = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    /** Host directory of the socket: created by `open`, removed by `close`. */
    readonly socketDir: string,
    private readonly handler: ChannelHandler,
  ) {}

  async open(): Promise<void> {
    await fs.promises.mkdir(this.socketDir, { recursive: true, mode: 0o755 });
    await fs.promises.chmod(this.socketDir, 0o755);
    await this.serve(path.join(this.socketDir, 'call.sock'));
  }

  /** The channel also answers at `socketPath` (a pooled container's own directory) until the returned stop. */
  async listen(socketPath: string): Promise<() => Promise<void>> {
    await this.serve(socketPath);
    return () => this.stop(socketPath);
  }

  async close(): Promise<void> {
    for (const c of this.clients) c.destroy();
    await Promise.all([...this.servers.keys()].map((p) => this.stop(p)));
    await fs.promises.rm(this.socketDir, { recursive: true, force: true });
  }

  private async serve(socketPath: string): Promise<void> {
    await fs.promises.rm(socketPath, { force: true });
    const server = net.createServer((socket) => this.accept(socket));
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(socketPath, () => resolve());
    });
    // The sandbox's uid connects: a socket needs write permission to be connected to.
    await fs.promises.chmod(socketPath, 0o666);
    this.servers.set(socketPath, server);
  }

  private async stop(socketPath: string): Promise<void> {
    const server = this.servers.get(socketPath);
    if (!server) return;
    this.servers.delete(socketPath);
    await new Promise<void>((resolve) => server.close(() => resolve()));
    await fs.promises.rm(socketPath, { force: true });
  }

  private accept(socket: net.Socket): void {
    this.clients.add(socket);
    socket.on('close', () => this.clients.delete(socket));
    socket.on('error', () => undefined);
    let buffer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      if (Buffer.byteLength(buffer) > MAX_LINE_BYTES && !buffer.includes('\n')) {
        this.reply(socket, {
          id: null,
          ok: false,
          error: { code: 'TOO_LARGE', message: 'a request is at most 16 MiB' },
        });
        socket.destroy();
        return;
      }
      let end: number;
      while ((end = buffer.indexOf('\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 1);
        if (line.trim()) void this.dispatch(socket, line);
      }
    });
  }

  private async dispatch(socket: net.Socket, line: string): Promise<void> {
    let id: unknown = null;
    try {
      const request = JSON.parse(line) as Record<string, unknown>;
      id = request.id ?? null;
      if (typeof request.op !== 'string')
        throw new Error('a request is {"id": n, "op": "input"|"call"|"return", …}');
      await this.slot();
      try {
        this.reply(socket, { id, ...(await this.handler(request as ChannelRequest)) });
      } finally {
        this.release();
      }
    } catch (err) {
      this.logger.debug({ msg: 'skill channel request failed', err: String(err) });
      this.reply(socket, { id, ok: false, error: { code: 'BAD_REQUEST', message: (err as Error).message } });
    }
  }

  private reply(socket: net.Socket, body: Record<string, unknown>): void {
    if (!socket.destroyed) socket.write(`${JSON.stringify(body)}\n`);
  }

  private slot(): Promise<void> {
    if (this.inFlight < MAX_IN_FLIGHT) {
      this.inFlight++;
      return Promise.resolve();
    }
    return new Promise((resolve) => this.waiting.push(() => resolve()));
  }

  private release(): void {
    const next = this.waiting.shift();
    if (next) next();
    else this.inFlight--;
  }
}
