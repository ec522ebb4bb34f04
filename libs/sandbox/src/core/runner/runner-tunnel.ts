import { Duplex } from 'node:stream';

/** Bytes of one `tunnel_write`: the runner acknowledges it once its queue towards the socket is below 1 MiB. */
export const TUNNEL_WRITE_BYTES = 256 * 1024;
/**
 * Consumed bytes acknowledged at once (`tunnel_ack`). Below the runner's 1 MiB window, so it never waits for bytes
 * the engine has taken but not yet acknowledged.
 */
export const TUNNEL_ACK_BYTES = 128 * 1024;
/** The readable side's buffer: what the consumer has not read yet, on top of what the runner's window holds back. */
const READ_HIGH_WATER = 64 * 1024;

/** What a tunnel needs of its runner connection (`RunnerConnection` implements it). */
export interface TunnelLink {
  /** `tunnel_write`; resolves with the runner's ack (`found: false`: the tunnel is gone). */
  tunnelWrite(tunnel: string, data: Buffer, eof: boolean): Promise<{ found: boolean }>;
  /** `tunnel_ack`: the engine consumed `bytes` of the tunnel's `tdata`. */
  tunnelAck(tunnel: string, bytes: number): void;
  /** `tunnel_close`: the runner closes the socket at once. */
  tunnelClose(tunnel: string): void;
  /** The tunnel is done with on the engine's side (destroyed, or ended both ways). */
  forget(tunnel: string): void;
}

/** A tunnel's socket ended badly in the box (reset, refused write), or the runner connection went away. */
export class TunnelError extends Error {}

/**
 * A TCP connection to a port inside a session's box, through the box's runner (protocol 5 `tunnel_*`): a Duplex whose
 * reads are the server's bytes and whose writes reach the server. Backpressure both ways without unbounded buffers:
 * each write waits for the runner's ack (its queue towards the socket is under 1 MiB), and the runner stops reading
 * the socket while 1 MiB it sent is not acknowledged, which this stream does only as its consumer takes the bytes.
 * `end()` shuts the socket's write side (the server still answers: half-close); the server shutting its side ends
 * the readable side; `destroy()` closes the socket.
 */
export class RunnerTunnel extends Duplex {
  private owner: { proc: string | null; kernel: string | null } = { proc: null, kernel: null };
  /** Received from the runner, not yet pushed (at most the runner's window). */
  private readonly received: Buffer[] = [];
  private receivedBytes = 0;
  private receivedEnd = false;
  private wanted = false;
  /** Pushed (consumed by the readable side) but not yet acknowledged. */
  private unacked = 0;
  /** The runner said the socket is gone: nothing to close there. */
  private socketGone = false;
  private pushedEnd = false;
  /** Given to the caller of `openTunnel`, who listens for its errors (before that, nobody would). */
  private handedOut = false;

  constructor(
    readonly id: string,
    private readonly link: TunnelLink,
  ) {
    super({
      allowHalfOpen: true,
      readableHighWaterMark: READ_HIGH_WATER,
      writableHighWaterMark: READ_HIGH_WATER,
    });
  }

  /** The runner's background process whose tree holds the listening socket, if known. */
  get proc(): string | null {
    return this.owner.proc;
  }

  /** The runner's kernel whose tree holds the listening socket, if known. */
  get kernel(): string | null {
    return this.owner.kernel;
  }

  /**
   * Bytes the engine holds for this tunnel: received and not yet read, plus written and not yet taken by the runner.
   * Bounded by the flow control (about the runner's 1 MiB window plus the stream buffers), whatever the peers do.
   */
  get bufferedBytes(): number {
    return this.receivedBytes + this.readableLength + this.writableLength;
  }

  // -- from the runner connection (its events for this tunnel) -----------------------------------------------------

  /** @internal `tunnel_opened`: who listens. */
  onOpened(proc: string | null, kernel: string | null): void {
    this.owner = { proc, kernel };
    this.handedOut = true;
  }

  /** @internal `tdata`. */
  onData(data: Buffer): void {
    if (this.destroyed) return;
    this.received.push(data);
    this.receivedBytes += data.length;
    this.pump();
  }

  /** @internal `tend`: the server shut its write side. */
  onServerEnd(): void {
    this.receivedEnd = true;
    this.pump();
  }

  /** @internal `tclosed`: the socket is gone (with the error that ended it, if any). */
  onSocketClosed(error?: string): void {
    this.socketGone = true;
    if (error !== undefined) {
      this.destroy(new TunnelError(`tunnel to the box: ${error}`));
      return;
    }
    this.receivedEnd = true;
    this.pump();
  }

  /** @internal The runner connection is gone (or the tunnel never opened: then `openTunnel` rejects instead). */
  onGone(err: Error): void {
    this.socketGone = true;
    this.destroy(this.handedOut ? new TunnelError(`tunnel to the box: ${err.message}`) : undefined);
  }

  // -- Duplex ------------------------------------------------------------------------------------------------------

  override _read(): void {
    this.wanted = true;
    this.pump();
  }

  override _write(chunk: Buffer, _encoding: BufferEncoding, callback: (error?: Error | null) => void): void {
    this.send([chunk], false).then(() => callback(), callback);
  }

  override _writev(
    chunks: Array<{ chunk: Buffer; encoding: BufferEncoding }>,
    callback: (error?: Error | null) => void,
  ): void {
    this.send(
      chunks.map((c) => c.chunk),
      false,
    ).then(() => callback(), callback);
  }

  override _final(callback: (error?: Error | null) => void): void {
    this.send([], true).then(() => callback(), callback);
  }

  override _destroy(err: Error | null, callback: (error?: Error | null) => void): void {
    this.received.length = 0;
    this.receivedBytes = 0;
    // Ended both ways, the runner closes the socket itself; otherwise it is closed now.
    const clean = err === null && this.receivedEnd && this.writableFinished;
    if (!this.socketGone && !clean) this.link.tunnelClose(this.id);
    this.link.forget(this.id);
    callback(err);
  }

  // -- internals ---------------------------------------------------------------------------------------------------

  /** Pushes what the consumer wants, acknowledging it to the runner in batches. */
  private pump(): void {
    while (this.wanted && this.received.length > 0) {
      const data = this.received.shift()!;
      this.receivedBytes -= data.length;
      this.unacked += data.length;
      this.wanted = this.push(data);
    }
    if (
      this.unacked >= TUNNEL_ACK_BYTES ||
      (this.received.length === 0 && this.unacked > 0 && this.receivedEnd)
    ) {
      if (!this.socketGone) this.link.tunnelAck(this.id, this.unacked);
      this.unacked = 0;
    }
    if (this.receivedEnd && this.received.length === 0 && !this.pushedEnd) {
      this.pushedEnd = true;
      this.push(null);
    }
  }

  /** Sends `chunks` in pieces of at most TUNNEL_WRITE_BYTES, each after the runner acknowledged the one before. */
  private async send(chunks: Buffer[], eof: boolean): Promise<void> {
    const data = chunks.length === 1 ? chunks[0] : Buffer.concat(chunks);
    for (let at = 0; at < data.length || (eof && at === 0); at += TUNNEL_WRITE_BYTES) {
      const piece = data.subarray(at, at + TUNNEL_WRITE_BYTES);
      const last = at + TUNNEL_WRITE_BYTES >= data.length;
      const { found } = await this.link.tunnelWrite(this.id, piece, eof && last);
      if (!found) throw new TunnelError('tunnel to the box: the connection is closed');
      if (last) break;
    }
  }
}
