import * as fs from 'node:fs';
import * as net from 'node:net';
import { RunnerRefusedError } from './runner.errors';

/** The relay could not be used (no socket there, nothing listening, no answer): the runner's connection still can. */
export class RelayUnavailableError extends Error {}

/** A connection to a port in a box, through its runner's relay: raw bytes both ways once `dialRelay` resolves. */
export interface RelayedConnection {
  socket: net.Socket;
  /** The runner's background process whose tree holds the listening socket, when known. */
  proc: string | null;
  /** The runner's kernel whose tree holds it, when known. */
  kernel: string | null;
}

/** Linux's O_PATH (the same on every architecture Node runs on there); Node does not export it. */
const O_PATH = 0o10000000;
const MAX_LINE_BYTES = 1024;
const DEFAULT_TIMEOUT_MS = 5_000;

/**
 * Connects to 127.0.0.1:`port` inside a box through its runner's relay socket (`socketPath`, on the host; the
 * protocol is in docker/sandbox/runner/runner_relay.py): the port and a newline out, one line back (`ok <proc>
 * <kernel>` or `err <code> <message>`), then the server's bytes untouched, half-closes passed on. No JSON, no base64,
 * no acknowledgements: the sockets' own buffers are the flow control.
 *
 * The socket's directory is writable by the box's own code, which could put a symlink there (to the Docker socket,
 * say) for the engine to follow with its next connection. So the path is opened without following a symlink
 * (O_PATH|O_NOFOLLOW), checked to be a socket by that descriptor, and connected through `/proc/self/fd/<fd>`, which
 * is that same inode whatever the path says by then.
 *
 * Throws `RunnerRefusedError` (its `code`: `connect`, `tunnel_limit`, `request`) when the runner refuses, and
 * `RelayUnavailableError` when the relay cannot be used at all.
 */
export async function dialRelay(
  socketPath: string,
  port: number,
  timeoutMs = DEFAULT_TIMEOUT_MS,
): Promise<RelayedConnection> {
  // Synchronous on purpose: a lookup of one name in a local directory and a stat, microseconds each, where two trips
  // through the thread pool would cost a loaded engine a good part of a millisecond on every connection.
  let fd: number;
  try {
    fd = fs.openSync(socketPath, O_PATH | fs.constants.O_NOFOLLOW);
  } catch (err) {
    throw new RelayUnavailableError(`${socketPath}: ${(err as NodeJS.ErrnoException).code ?? String(err)}`);
  }
  let socket: net.Socket;
  try {
    if (!fs.fstatSync(fd).isSocket()) throw new RelayUnavailableError(`${socketPath} is not a socket`);
    socket = await connect(`/proc/self/fd/${fd}`, socketPath);
  } finally {
    fs.closeSync(fd);
  }
  try {
    socket.write(`${port}\n`);
    const [line, rest] = await firstLine(socket, timeoutMs, socketPath);
    if (rest.length > 0) socket.unshift(rest); // a server that speaks first: its bytes stay for the caller
    const [verdict, first = '', ...words] = line.split(' ');
    if (verdict === 'ok') {
      const kernel = words[0];
      return {
        socket,
        proc: first === '-' || first === '' ? null : first,
        kernel: kernel === undefined || kernel === '-' ? null : kernel,
      };
    }
    socket.destroy();
    if (verdict === 'err') throw new RunnerRefusedError(words.join(' '), first);
    throw new RelayUnavailableError(
      `the relay at ${socketPath} answered something else: ${line.slice(0, 200)}`,
    );
  } catch (err) {
    socket.destroy();
    throw err;
  }
}

function connect(path: string, socketPath: string): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    const socket = net.connect({ path, allowHalfOpen: true });
    socket.once('connect', () => {
      socket.removeAllListeners('error');
      resolve(socket);
    });
    socket.once('error', (err: NodeJS.ErrnoException) =>
      reject(new RelayUnavailableError(`${socketPath}: ${err.code ?? err.message}`)),
    );
  });
}

/** The runner's first line, and whatever came after it in the same reads. */
function firstLine(socket: net.Socket, timeoutMs: number, socketPath: string): Promise<[string, Buffer]> {
  return new Promise((resolve, reject) => {
    let seen: Buffer = Buffer.alloc(0);
    const done = (err?: Error, result?: [string, Buffer]) => {
      clearTimeout(timer);
      socket.removeListener('readable', onReadable);
      socket.removeListener('end', onEnd);
      socket.removeListener('error', onError);
      if (err) reject(err);
      else resolve(result!);
    };
    const onReadable = () => {
      let chunk: Buffer | null;
      while ((chunk = socket.read() as Buffer | null) !== null) {
        seen = seen.length === 0 ? chunk : Buffer.concat([seen, chunk]);
        const newline = seen.indexOf(0x0a);
        if (newline >= 0) {
          done(undefined, [seen.subarray(0, newline).toString('utf8'), seen.subarray(newline + 1)]);
          return;
        }
        if (seen.length > MAX_LINE_BYTES) {
          done(
            new RelayUnavailableError(`the relay at ${socketPath} sent no line in ${MAX_LINE_BYTES} bytes`),
          );
          return;
        }
      }
    };
    const onEnd = () =>
      done(new RelayUnavailableError(`the relay at ${socketPath} closed without answering`));
    const onError = (err: Error) =>
      done(new RelayUnavailableError(`the relay at ${socketPath}: ${err.message}`));
    const timer = setTimeout(
      () =>
        done(new RelayUnavailableError(`the relay at ${socketPath} did not answer within ${timeoutMs} ms`)),
      timeoutMs,
    );
    socket.on('readable', onReadable);
    socket.once('end', onEnd);
    socket.once('error', onError);
  });
}
