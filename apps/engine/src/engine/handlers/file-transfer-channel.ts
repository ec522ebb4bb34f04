import { Injectable } from '@nestjs/common';
import type { Readable } from 'node:stream';
import type { FileTransferRequest } from '../../state/actions/action-request';

/** What a download tells its client before the first byte: the file's size and the bytes that follow. */
export interface DownloadHead {
  /** The action recording the transfer (the `x-switchyard-action-id` header). */
  actionId: string;
  /** The file's whole size (a directory's tar: unknown). */
  size?: number;
  /** The inclusive range sent, when one was asked for. */
  range?: { start: number; end: number };
}

/** Where a download's bytes go: the HTTP response. */
export interface TransferSink {
  /** Sends `stream` out after `head`; resolves once every byte left, rejects when the client went away. */
  send(head: DownloadHead, stream: Readable): Promise<void>;
}

/**
 * The bytes of one transfer, handed from the HTTP edge to the file handler beside the request: the body of an upload,
 * or the sink of a download. `failure` carries back the domain error a failed transfer met, for the edge to answer
 * with its own status (404, 409, 413, 416) rather than a generic failed action.
 */
export type TransferIo = ({ body: Readable; sink?: undefined } | { sink: TransferSink; body?: undefined }) & {
  failure?: unknown;
};

/**
 * Hands a transfer's stream to the handler that runs it, keyed by the very request object the edge submits: a request
 * built from JSON (an action body, a retry of a recorded transfer) has none, and is refused. Weakly held, so a
 * request refused before it ran leaves nothing behind.
 */
@Injectable()
export class FileTransferChannel {
  private readonly pending = new WeakMap<FileTransferRequest, TransferIo>();

  attach(request: FileTransferRequest, io: TransferIo): void {
    this.pending.set(request, io);
  }

  has(request: FileTransferRequest): boolean {
    return this.pending.has(request);
  }

  /** The stream attached to `request`, once: a second run of the same request object finds none. */
  take(request: FileTransferRequest): TransferIo | undefined {
    const io = this.pending.get(request);
    this.pending.delete(request);
    return io;
  }
}
