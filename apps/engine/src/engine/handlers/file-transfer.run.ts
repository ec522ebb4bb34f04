import { createHash } from 'node:crypto';
import { Transform, type TransformCallback } from 'node:stream';
import { type ActionError, NO_RISK, SwitchyardError } from '@switchyard/common';
import { FileOpError } from '@switchyard/workspace';
import type { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import type { FileTransferRequest } from '../../state/actions/action-request';
import type { Outcome } from '../actions/action-handler.port';
import type { TransferIo } from './file-transfer-channel';

const base = { tier: 'engine' as const, risk: NO_RISK };

/**
 * Runs one transfer of the file transfer API as the body of its `file` action: the bytes move while the action runs,
 * so its duration is the transfer's and its output (size, sha256: the graph's excerpt) describes what really moved.
 * `rel` is the request's path, normalized by the path guard.
 */
export async function runTransfer(
  workspaces: SessionWorkspaces,
  sessionId: string,
  request: FileTransferRequest,
  io: TransferIo,
  at: { rel: string; actionId: string },
  signal: AbortSignal,
): Promise<Outcome> {
  const { rel, actionId } = at;
  try {
    switch (request.op) {
      case 'upload': {
        const body = needBody(io);
        const stop = abortOn(signal, () => body.destroy(new Error('cancelled')));
        try {
          const { size, sha256 } = await workspaces.writeStream(sessionId, request.path, body, {
            overwrite: request.overwrite !== false,
          });
          return succeeded({ path: rel, size, sha256 }, rel, 'write');
        } finally {
          stop();
        }
      }
      case 'upload_archive': {
        const body = needBody(io);
        const stop = abortOn(signal, () => body.destroy(new Error('cancelled')));
        try {
          const { files, directories, bytes } = await workspaces.archiveIn(sessionId, request.path, body);
          return succeeded({ path: rel, files, directories, bytes }, rel || '.', 'write');
        } finally {
          stop();
        }
      }
      case 'download': {
        const sink = needSink(io);
        const file = await workspaces.readStream(sessionId, request.path, request.range);
        const hashed = hashing(file.stream);
        const range = request.range && {
          start: request.range.start,
          end: Math.min(request.range.end ?? file.size - 1, file.size - 1),
        };
        const stop = abortOn(signal, () => hashed.stream.destroy(new Error('cancelled')));
        try {
          await sink.send({ actionId, size: file.size, ...(range && { range }) }, hashed.stream);
        } finally {
          stop();
        }
        return succeeded(
          {
            path: rel,
            size: file.size,
            bytes: hashed.bytes(),
            sha256: hashed.sha256(),
            ...(range && { range }),
          },
          rel,
          'read',
        );
      }
      case 'download_archive': {
        const sink = needSink(io);
        const tar = await workspaces.archiveOut(sessionId, request.path);
        const hashed = hashing(tar);
        const stop = abortOn(signal, () => hashed.stream.destroy(new Error('cancelled')));
        try {
          await sink.send({ actionId }, hashed.stream);
        } finally {
          stop();
        }
        return succeeded({ path: rel, bytes: hashed.bytes(), sha256: hashed.sha256() }, rel || '.', 'read');
      }
    }
  } catch (err) {
    io.failure = err;
    if (err instanceof FileOpError) {
      const error: ActionError = { class: err.errorClass, code: err.code, message: err.message };
      return { ...base, status: 'failed', error, files: [] };
    }
    if (err instanceof SwitchyardError) {
      // A refusal of the input found while streaming (an archive entry leading out, a link in the way): recorded
      // denied, answered as the 4xx it is.
      if (err.kind === 'invalid_input') {
        return {
          ...base,
          status: 'denied',
          error: { class: 'policy', code: err.code, message: err.message },
          files: [],
          inputRefusal: err,
        };
      }
      throw err;
    }
    if (!streamGone(io, err)) throw err;
    // The client went away mid-transfer (or the action was cancelled): nothing was written, nothing more is sent.
    const message = err instanceof Error ? err.message : String(err);
    return {
      ...base,
      status: 'failed',
      error: { class: 'cancelled', code: 'TRANSFER_ABORTED', message: `the transfer stopped: ${message}` },
      files: [],
    };
  }
}

/** Whether `err` is the transfer's stream breaking off (a client gone, a cancel), not a fault of the engine. */
function streamGone(io: TransferIo, err: unknown): boolean {
  const code = (err as { code?: unknown } | undefined)?.code;
  if (code === 'ECONNRESET' || code === 'ERR_STREAM_PREMATURE_CLOSE' || code === 'EPIPE') return true;
  if (err instanceof Error && (err.message === 'aborted' || err.message === 'cancelled')) return true;
  return Boolean(io.body?.destroyed);
}

function succeeded(output: Record<string, unknown>, rel: string, access: 'read' | 'write'): Outcome {
  return { ...base, status: 'succeeded', output, files: [{ path: rel, access }] };
}

function needBody(io: TransferIo) {
  if (!io.body) throw new Error('an upload without a body: the edge must attach one');
  return io.body;
}

function needSink(io: TransferIo) {
  if (!io.sink) throw new Error('a download without a sink: the edge must attach one');
  return io.sink;
}

function abortOn(signal: AbortSignal, stop: () => void): () => void {
  if (signal.aborted) stop();
  signal.addEventListener('abort', stop, { once: true });
  return () => signal.removeEventListener('abort', stop);
}

/** The stream as it is, counting and hashing the bytes that pass (what the client was sent). */
function hashing(source: NodeJS.ReadableStream): { stream: Transform; bytes(): number; sha256(): string } {
  const hash = createHash('sha256');
  let bytes = 0;
  const stream = new Transform({
    transform(chunk: Buffer, _enc: BufferEncoding, done: TransformCallback) {
      hash.update(chunk);
      bytes += chunk.length;
      done(null, chunk);
    },
  });
  source.on('error', (err: Error) => stream.destroy(err));
  source.pipe(stream);
  stream.on('close', () => {
    // The consumer gone: stop reading the file (or walking the directory).
    const s = source as NodeJS.ReadableStream & { destroy?: () => void };
    if (!stream.readableEnded) s.destroy?.();
  });
  let digest: string | undefined;
  return { stream, bytes: () => bytes, sha256: () => (digest ??= hash.digest('hex')) };
}
