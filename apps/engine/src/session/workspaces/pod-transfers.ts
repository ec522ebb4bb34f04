import type { Readable } from 'node:stream';
import { SandboxInternalError, type ExecStream, type SessionPods } from '@switchyard/sandbox';
import { rangeWithin, resolveInside, WORKSPACE_TOOL_ROOT } from '@switchyard/workspace';
import { transferError, type TransferRefusal } from './pod-transfer-errors';
import { checkedOutput, collect, CommandGoneError, pumpFramed, readLine } from './pod-transfer-streams';
import type { ArchiveWriteResult, ByteRange, FileReadStream, FileWriteResult } from './session-workspaces';

/** How long the program may take to answer once the upload's last byte went out (it renames, or cleans up). */
const ANSWER_TIMEOUT_MS = 120_000;
/** The program's diagnostics kept for a failure's message. */
const STDERR_BYTES = 8 * 1024;
/** GNU tar's "some files changed while being read": the archive is still complete. */
const TAR_FILES_CHANGED = 1;

export interface PodTransferLimits {
  maxWorkspaceBytes: number;
  maxPathLength: number;
  /** Most entries one archive upload may hold. */
  maxArchiveEntries: number;
}

/**
 * The file transfer API on a session pod's `/workspace`: each transfer is one exec of the transfer program
 * (libs/workspace/src/pod/file-transfer.py) in the pod's runner container, its bytes streamed over the exec's stdin or
 * stdout (`KubeClient.execStream`), so the engine holds a few chunks of a GiB at a time. Paths are refused lexically
 * here, then walked in the pod without following a link out. Uploads hold the session pod's lock
 * (`SessionPods.exclusive`) until the program answered: a checkpoint, a fork or a code action never sees half of one.
 * Downloads do not: a slow client would otherwise stall the session.
 */
export class PodTransfers {
  constructor(
    private readonly pods: Pick<SessionPods, 'execStream' | 'exclusive'>,
    private readonly program: string,
    private readonly limits: PodTransferLimits,
  ) {}

  async readStream(
    sessionId: string,
    path: string,
    range?: ByteRange,
  ): Promise<FileReadStream & { start: number; end: number }> {
    const rel = this.fileRel(path);
    // Checks the range's own shape (the host's messages); its fit in the file is the program's to check.
    if (range) rangeWithin(range, Number.MAX_SAFE_INTEGER, rel);
    const exec = await this.pods.execStream(
      sessionId,
      this.argv('read', rel, String(range?.start ?? -1), String(range ? (range.end ?? -1) : -1)),
    );
    const stderr = collect(exec.stderr, STDERR_BYTES);
    const head = await this.head(exec, rel, stderr);
    const { size, mtimeMs, start, end } = head as {
      size: number;
      mtimeMs: number;
      start: number;
      end: number;
    };
    const stream = checkedOutput(exec.stdout, {
      verdict: verdict(exec, [0], stderr),
      expectedBytes: end - start + 1,
      abandon: () => exec.close(),
    });
    return { size, mtimeMs, start, end, stream };
  }

  writeStream(
    sessionId: string,
    path: string,
    body: Readable,
    options: { overwrite: boolean },
  ): Promise<FileWriteResult & { path: string; realPath: string }> {
    const rel = this.fileRel(path);
    return this.pods.exclusive(sessionId, async () => {
      const argv = this.argv(
        'write',
        rel,
        options.overwrite ? '1' : '0',
        String(this.limits.maxWorkspaceBytes),
      );
      const answer = await this.upload(await this.pods.execStream(sessionId, argv), body, rel);
      return {
        path: rel,
        size: answer.size as number,
        sha256: answer.sha256 as string,
        realPath: answer.realPath as string,
      };
    });
  }

  async archiveOut(sessionId: string, path: string): Promise<Readable> {
    const rel = this.dirRel(path);
    const exec = await this.pods.execStream(sessionId, this.argv('tar-out', rel));
    const stderr = collect(exec.stderr, STDERR_BYTES);
    await this.head(exec, rel, stderr);
    return checkedOutput(exec.stdout, {
      verdict: verdict(exec, [0, TAR_FILES_CHANGED], stderr),
      abandon: () => exec.close(),
    });
  }

  archiveIn(sessionId: string, path: string, tar: Readable): Promise<ArchiveWriteResult & { path: string }> {
    const rel = this.dirRel(path);
    return this.pods.exclusive(sessionId, async () => {
      const argv = this.argv(
        'tar-in',
        rel,
        String(this.limits.maxWorkspaceBytes),
        String(this.limits.maxArchiveEntries),
      );
      const answer = await this.upload(await this.pods.execStream(sessionId, argv), tar, rel);
      return {
        path: rel,
        files: answer.files as number,
        directories: answer.directories as number,
        bytes: answer.bytes as number,
      };
    });
  }

  private argv(op: string, ...args: string[]): string[] {
    return ['python3', '-I', '-S', '-c', this.program, op, WORKSPACE_TOOL_ROOT, ...args];
  }

  private fileRel(path: string): string {
    return resolveInside(WORKSPACE_TOOL_ROOT, path, 'path', {
      rejectRoot: true,
      maxPathLength: this.limits.maxPathLength,
    }).rel;
  }

  private dirRel(path: string): string {
    return resolveInside(WORKSPACE_TOOL_ROOT, path, 'path', {
      allowEmpty: true,
      maxPathLength: this.limits.maxPathLength,
    }).rel;
  }

  /** The program's first line: its refusal (thrown as the host would throw it) or what comes next. */
  private async head(
    exec: ExecStream,
    rel: string,
    stderr: Promise<Buffer>,
  ): Promise<Record<string, unknown>> {
    let line: string | undefined;
    try {
      line = await readLine(exec.stdout);
    } catch (err) {
      exec.close();
      throw err;
    }
    if (line === undefined) {
      exec.close();
      throw failure('it answered nothing', (await stderr).toString('utf8'));
    }
    const doc = parse(line);
    if (doc.ok !== true) {
      exec.close();
      throw transferError(doc.error as TransferRefusal, rel);
    }
    return doc;
  }

  /** Streams `body` in as frames and reads the program's one answer; the body's own failure wins over the refusal. */
  private async upload(exec: ExecStream, body: Readable, rel: string): Promise<Record<string, unknown>> {
    const stderr = collect(exec.stderr, STDERR_BYTES);
    const stdout = collect(exec.stdout, 64 * 1024);
    let pumpError: Error | undefined;
    try {
      await pumpFramed(body, exec.stdin);
    } catch (err) {
      pumpError = err instanceof Error ? err : new Error(String(err));
    }
    let timer: NodeJS.Timeout | undefined;
    const ended = await Promise.race([
      exec.exit.then(
        () => true,
        () => true,
      ),
      new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), ANSWER_TIMEOUT_MS))),
    ]);
    clearTimeout(timer);
    if (!ended) {
      exec.close();
      throw failure(`no answer within ${ANSWER_TIMEOUT_MS} ms of the upload's end`, '');
    }
    const line = (await stdout).toString('utf8').trim();
    if (pumpError !== undefined && !(pumpError instanceof CommandGoneError)) throw pumpError;
    if (!line) throw failure('it answered nothing', (await stderr).toString('utf8'));
    const doc = parse(line);
    if (doc.ok !== true) throw transferError(doc.error as TransferRefusal, rel);
    return doc;
  }
}

function parse(line: string): Record<string, unknown> {
  try {
    const doc = JSON.parse(line) as unknown;
    if (doc !== null && typeof doc === 'object') return doc as Record<string, unknown>;
  } catch {
    // answered below
  }
  throw failure(`its answer is not JSON: ${line.slice(0, 200)}`, '');
}

/** Why a download's command failed, once it ended; `undefined` when it ended with one of `ok`. */
async function verdict(exec: ExecStream, ok: number[], stderr: Promise<Buffer>): Promise<string | undefined> {
  try {
    const { exitCode, message } = await exec.exit;
    if (ok.includes(exitCode)) return undefined;
    const why = (await stderr).toString('utf8').trim().split('\n').slice(-3).join('; ');
    return `the transfer program in the pod exited ${exitCode}: ${why || message || 'no message'}`;
  } catch (err) {
    return `the connection to the pod dropped: ${(err as Error).message}`;
  }
}

function failure(why: string, stderr: string): SandboxInternalError {
  const tail = stderr.trim().split('\n').slice(-3).join('; ');
  return new SandboxInternalError(
    'POD_TRANSFER',
    `the file transfer program failed in the session's pod: ${why}${tail ? ` (${tail})` : ''}`,
    { retriable: true },
  );
}
