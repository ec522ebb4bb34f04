import { PassThrough, Writable } from 'node:stream';
import type { AttachedStreams } from './kube-types';

/**
 * The Kubernetes streaming protocol (`channel.k8s.io` over a WebSocket) as node streams, for attach and exec. Every
 * binary message starts with its channel: 0 stdin, 1 stdout, 2 stderr, 3 the exec's final status (a JSON `Status`),
 * 4 terminal resize, and with `v5.channel.k8s.io` 255 = "close channel n" (a half-close, so stdin can end while the
 * output keeps coming). No client library here: the adapter hands over a connected socket.
 */

export const STDIN_CHANNEL = 0;
export const STDOUT_CHANNEL = 1;
export const STDERR_CHANNEL = 2;
export const STATUS_CHANNEL = 3;
export const CLOSE_CHANNEL = 255;
/** The only version that can half-close stdin. */
export const V5_PROTOCOL = 'v5.channel.k8s.io';
/** stdin goes out in frames of at most this much. */
const STDIN_FRAME_BYTES = 256 * 1024;

/** What the channel streams need of a connected WebSocket. */
export interface ChannelSocket {
  /** The subprotocol the server chose. */
  readonly protocol: string;
  send(data: Buffer, callback: (err?: Error) => void): void;
  close(): void;
  /** Stops reading from the connection (the server's sends then wait: TCP's own backpressure). */
  pause?(): void;
  resume?(): void;
}

export interface ChannelStreamsOptions {
  /**
   * Pause the socket while stdout or stderr is over its buffer, resume once drained (a streamed exec). Off for the
   * runner's attach, whose readers always consume.
   */
  flowControl?: boolean;
}

/** The `Status` an exec ends with. */
export interface ExecStatus {
  status?: string;
  message?: string;
  reason?: string;
  details?: { causes?: Array<{ reason?: string; message?: string }> };
}

/** The exit code a status names: 0 on `Success`, the `ExitCode` cause on `NonZeroExitCode`, else undefined. */
export function exitCodeOf(status: ExecStatus): number | undefined {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  const code = cause?.message === undefined ? NaN : Number(cause.message);
  return Number.isInteger(code) ? code : undefined;
}

/**
 * One attach or exec connection. The adapter feeds it every message (`receive`) and the close (`socketClosed`);
 * the streams end when the connection does.
 */
export class ChannelStreams implements AttachedStreams {
  readonly stdout = new PassThrough();
  readonly stderr = new PassThrough();
  readonly stdin: Writable;
  readonly closed: Promise<void>;
  /** The exec's final status, once it came. */
  status?: ExecStatus;
  private markClosed!: () => void;
  private done = false;
  private readonly statusListeners = new Set<(s: ExecStatus) => void>();
  /** The output streams over their buffer right now (flow control). */
  private readonly full = new Set<PassThrough>();
  private readonly flowControl: boolean;

  constructor(
    private readonly socket: ChannelSocket,
    options: ChannelStreamsOptions = {},
  ) {
    this.closed = new Promise<void>((resolve) => (this.markClosed = resolve));
    this.flowControl = options.flowControl === true && !!socket.pause && !!socket.resume;
    if (this.flowControl) {
      for (const out of [this.stdout, this.stderr]) {
        out.on('drain', () => {
          this.full.delete(out);
          if (this.full.size === 0 && !this.done) this.socket.resume?.();
        });
      }
    }
    const canHalfClose = socket.protocol === V5_PROTOCOL;
    this.stdin = new Writable({
      // A streamed exec: room for a few frames, and what queued up meanwhile goes out in full frames (every message
      // costs the API server a translation, so many small writes would cost more than their bytes).
      ...(this.flowControl && { highWaterMark: STDIN_FRAME_BYTES * 4 }),
      write: (chunk: Buffer, _enc, callback) => this.sendStdin(chunk, callback),
      writev: (chunks, callback) =>
        this.sendStdin(Buffer.concat(chunks.map((c) => c.chunk as Buffer)), callback),
      final: (callback) => {
        // Without v5 there is no way to end stdin alone: the command must know how much to read.
        if (canHalfClose && !this.done) this.send(Buffer.from([CLOSE_CHANNEL, STDIN_CHANNEL]), callback);
        else callback();
      },
    });
    this.stdin.on('error', () => undefined); // writes after the close fail; the caller learns it from `closed`
  }

  /** True once the server chose `v5.channel.k8s.io` (stdin can be half-closed). */
  get halfCloses(): boolean {
    return this.socket.protocol === V5_PROTOCOL;
  }

  /** Calls `listener` once the exec's status arrives. */
  onStatus(listener: (status: ExecStatus) => void): void {
    if (this.status) listener(this.status);
    else this.statusListeners.add(listener);
  }

  /** A message from the server. */
  receive(data: Buffer): void {
    if (data.length === 0 || this.done) return;
    const channel = data[0];
    const payload = data.subarray(1);
    switch (channel) {
      case STDOUT_CHANNEL:
        if (payload.length > 0) this.output(this.stdout, payload);
        return;
      case STDERR_CHANNEL:
        if (payload.length > 0) this.output(this.stderr, payload);
        return;
      case STATUS_CHANNEL: {
        try {
          this.status = JSON.parse(payload.toString('utf8')) as ExecStatus;
        } catch {
          this.status = { status: 'Failure', message: payload.toString('utf8').slice(0, 500) };
        }
        for (const listener of this.statusListeners) listener(this.status);
        this.statusListeners.clear();
        return;
      }
      case CLOSE_CHANNEL:
        if (payload[0] === STDOUT_CHANNEL) this.stdout.end();
        else if (payload[0] === STDERR_CHANNEL) this.stderr.end();
        return;
      default:
        return;
    }
  }

  /** The connection is gone: the output streams end. Idempotent. */
  socketClosed(): void {
    if (this.done) return;
    this.done = true;
    this.stdout.end();
    this.stderr.end();
    this.stdin.destroy();
    this.markClosed();
  }

  close(): void {
    if (this.done) return;
    try {
      this.socket.close();
    } catch {
      // already closing
    }
    this.socketClosed();
  }

  private output(out: PassThrough, payload: Buffer): void {
    if (out.writableEnded) return;
    if (!out.write(payload) && this.flowControl) {
      if (this.full.size === 0) this.socket.pause?.();
      this.full.add(out);
    }
  }

  private sendStdin(chunk: Buffer, callback: (err?: Error | null) => void): void {
    if (this.done) return callback(new Error('the stream connection is closed'));
    const frames: Buffer[] = [];
    for (let at = 0; at < chunk.length; at += STDIN_FRAME_BYTES) {
      const piece = chunk.subarray(at, at + STDIN_FRAME_BYTES);
      const frame = Buffer.allocUnsafe(piece.length + 1);
      frame[0] = STDIN_CHANNEL;
      piece.copy(frame, 1);
      frames.push(frame);
    }
    let left = frames.length;
    let failed = false;
    if (left === 0) return callback();
    for (const frame of frames) {
      this.send(frame, (err) => {
        if (failed) return;
        if (err) {
          failed = true;
          return callback(err);
        }
        if (--left === 0) callback();
      });
    }
  }

  private send(frame: Buffer, callback: (err?: Error | null) => void): void {
    try {
      this.socket.send(frame, (err) => callback(err ?? null));
    } catch (err) {
      callback(err as Error);
    }
  }
}
