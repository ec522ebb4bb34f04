import { Inject, Injectable, Logger } from '@nestjs/common';
import { KUBERNETES_SESSION_PODS, RunnerRefusedError, type SessionPods } from '@switchyard/sandbox';
import {
  changedPaths,
  checkAnswer,
  type FileOp,
  type FileOpOutcome,
  parseAnswer,
  resolveInside,
  snapshotFromWire,
  unwrapAnswer,
  WORKSPACE_TOOL_ROOT,
  type WorkspaceSnapshot,
  type WorkspaceToolOp,
  type WorkspaceToolRequest,
  type WorkspaceToolSuccess,
  WorkspaceManager,
} from '@switchyard/workspace';
import { readFileSync } from 'node:fs';
import { mkdir, readFile, rm, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import type { Readable } from 'node:stream';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { PodTransfers } from './pod-transfers';
import {
  type ArchiveWriteResult,
  type ByteRange,
  type FileReadStream,
  type FileWriteResult,
  SessionWorkspaces,
} from './session-workspaces';

/** A walk's bound and a snapshot's, as the host workspaces default them. */
const MAX_SCAN_ENTRIES = 100_000;
const SNAPSHOT_MAX_ENTRIES = 10_000;
const SNAPSHOT_BOUNDS = { maxEntries: SNAPSHOT_MAX_ENTRIES, maxScanEntries: MAX_SCAN_ENTRIES };
/** How long one file API op may take in the pod: a grep may spend its time budget on many files. */
const TOOL_TIMEOUT_MS = 60_000;
const MAX_PATH_LENGTH = 4096;

/** Thrown when the tool in the pod fails in a way that is the engine's, not the caller's (a 500). */
class PodToolError extends Error {}

/**
 * The Kubernetes backend's workspaces: each session's `/workspace` is a volume of its own pod (`SessionPods`), where the
 * engine reaches it only through the pod's runner. Every file API operation and raw read or write runs there as the
 * workspace tool (libs/workspace/src/pod: the file API's own code, bundled, run by the pod's `node`), so paths are
 * guarded and limits applied exactly as on a host workspace, by the same code, confined to the pod. Snapshots are
 * the runner's own walk (the same walk, no process started). The file transfer API's bytes go through an exec of
 * their own instead (`PodTransfers`), streamed both ways.
 */
@Injectable()
export class PodWorkspaces extends SessionWorkspaces {
  readonly kind = 'pod' as const;
  private readonly logger = new Logger('PodWorkspaces');
  private readonly tool: string;
  private readonly transfers: PodTransfers;

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(KUBERNETES_SESSION_PODS) private readonly pods: SessionPods,
    private readonly staging: WorkspaceManager,
  ) {
    super();
    this.tool = readTool(config.kubernetes.workspaceTool);
    pods.walkAfterRuns(SNAPSHOT_BOUNDS);
    this.transfers = new PodTransfers(pods, readTool(config.kubernetes.workspaceTransfer), {
      maxWorkspaceBytes: config.workspace.maxWorkspaceBytes,
      maxPathLength: MAX_PATH_LENGTH,
      maxArchiveEntries: MAX_SCAN_ENTRIES,
    });
  }

  root(): string {
    return WORKSPACE_TOOL_ROOT;
  }

  async open(sessionId: string, options: { image?: string; reopen?: boolean } = {}): Promise<void> {
    // A host directory too, empty but for the browser's files on their way in or out (`hostDir`).
    await this.staging.create(sessionId);
    let adopted: boolean;
    try {
      // Reopened (a restart, a replica taken over): the pod the previous engine left is adopted when it is there.
      adopted = (await this.pods.podFor(sessionId, options.image, { adopt: options.reopen === true }))
        .adopted;
    } catch (err) {
      // No session comes of it (the cluster could not give it a pod): nothing of it stays on the host either.
      await this.staging.remove(sessionId).catch(() => undefined);
      throw err;
    }
    if (options.reopen && !adopted) {
      // Its pod was gone (or its runner would not resync): the session's files went with it.
      this.logger.warn({
        msg: 'session reopened in a new pod: its workspace did not survive the engine restart',
        sessionId,
      });
    }
  }

  async close(sessionId: string): Promise<void> {
    await this.pods.release(sessionId);
    await this.staging.remove(sessionId);
  }

  /**
   * Staging directories of sessions the engine does not hold, and (one engine: its state knows every session) the
   * pods dead engines left for sessions it does not hold; with replicas those are the takeover's (`ReplicaTakeover`).
   */
  async removeOrphans(known: ReadonlySet<string>): Promise<string[]> {
    const dirs = await this.staging.removeOrphans(known);
    if (this.config.state.store === 'sqlite') {
      const pods = await this.pods.reapOrphans(known);
      if (pods.length > 0)
        this.logger.warn({ msg: 'deleted the pods of sessions that no longer exist', pods });
    }
    return dirs;
  }

  hostDir(sessionId: string): string {
    return this.staging.dirOf(sessionId);
  }

  async pull(sessionId: string, paths: string[], maxBytes: number): Promise<void> {
    for (const p of paths) {
      const bytes = await this.readBytes(sessionId, p, maxBytes);
      const target = resolveInside(this.staging.dirOf(sessionId), p, 'path').abs;
      await mkdir(dirname(target), { recursive: true });
      await writeFile(target, bytes);
    }
  }

  async push(sessionId: string, paths: string[], maxBytes: number): Promise<void> {
    for (const p of paths) {
      const source = resolveInside(this.staging.dirOf(sessionId), p, 'path').abs;
      await this.writeBytes(sessionId, p, await readFile(source), maxBytes);
      await rm(source, { force: true });
    }
  }

  async fileOp(sessionId: string, op: FileOp): Promise<FileOpOutcome> {
    const limits = this.limits();
    const answer = await this.run(
      sessionId,
      {
        op: 'file',
        request: op,
        limits,
        options: { maxScanEntries: MAX_SCAN_ENTRIES },
      },
      limits.maxFileBytes,
    );
    return answer.outcome;
  }

  /**
   * The walk the host workspaces take (`WorkspaceManager.snapshot`), taken by the session pod's runner in its own
   * process (runner_snapshot.py): it runs twice around every code action, so it starts no process in the pod. The one
   * after a run (`afterRun`) is usually already here: the runner took it as the run ended and sent it with the exit.
   */
  async snapshot(sessionId: string, options: { afterRun?: boolean } = {}): Promise<WorkspaceSnapshot> {
    let answer: Record<string, unknown>;
    try {
      answer = await this.pods.snapshot(sessionId, SNAPSHOT_BOUNDS, TOOL_TIMEOUT_MS, options);
    } catch (err) {
      // The runner's own refusals are the engine's to answer for; losing the runner or the pod stays its own error.
      if (!(err instanceof RunnerRefusedError)) throw err;
      const why = err.code === 'snapshot_size' ? 'its answer was larger than expected' : err.message;
      throw new PodToolError(`the workspace tool failed in the session's pod: ${why}`);
    }
    return snapshotFromWire(unwrapAnswer(checkAnswer<'snapshot'>(answer)).snapshot);
  }

  changedPaths(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[] {
    return changedPaths(before, after);
  }

  /** Raw bytes of a workspace file (an upload, an image to attach), path-guarded in the pod. */
  async readBytes(sessionId: string, path: string, maxBytes: number): Promise<Buffer> {
    const answer = await this.run(
      sessionId,
      { op: 'readBytes', path, maxBytes, limits: this.limits() },
      maxBytes,
    );
    return Buffer.from(answer.base64, 'base64');
  }

  /** Writes a file into the workspace (a screenshot, a download), path-guarded and within the cap, in the pod. */
  async writeBytes(sessionId: string, path: string, bytes: Buffer, maxBytes: number): Promise<void> {
    await this.run(
      sessionId,
      { op: 'writeBytes', path, base64: bytes.toString('base64'), maxBytes, limits: this.limits() },
      0,
    );
  }

  /** The file transfer API: streamed through an exec in the pod (`PodTransfers`). */
  readStream(sessionId: string, path: string, range?: ByteRange): Promise<FileReadStream> {
    return this.transfers.readStream(sessionId, path, range);
  }

  writeStream(
    sessionId: string,
    path: string,
    body: Readable,
    options: { overwrite: boolean },
  ): Promise<FileWriteResult> {
    return this.transfers.writeStream(sessionId, path, body, options);
  }

  archiveOut(sessionId: string, path: string): Promise<Readable> {
    return this.transfers.archiveOut(sessionId, path);
  }

  archiveIn(sessionId: string, path: string, tar: Readable): Promise<ArchiveWriteResult> {
    return this.transfers.archiveIn(sessionId, path, tar);
  }

  private limits(): { maxFileBytes: number; maxWorkspaceBytes: number; maxPathLength: number } {
    return {
      maxFileBytes: this.config.workspace.maxFileBytes,
      maxWorkspaceBytes: this.config.workspace.maxWorkspaceBytes,
      maxPathLength: MAX_PATH_LENGTH,
    };
  }

  /**
   * One request to the tool, as a fresh `node` run through the session's runner: the request on stdin, one JSON answer
   * on stdout (its refusals revived as the very errors the host's file API throws). `payloadBytes`: the largest file
   * the answer may carry (base64 grows it by a third).
   */
  private async run<O extends WorkspaceToolOp>(
    sessionId: string,
    request: WorkspaceToolRequest & { op: O },
    payloadBytes: number,
  ): Promise<WorkspaceToolSuccess<O>> {
    const capBytes = Math.ceil(payloadBytes * 1.4) + 4 * 2 ** 20;
    const r = await this.pods.runInPod(sessionId, {
      language: 'node',
      code: this.tool,
      stdin: JSON.stringify(request),
      timeoutMs: TOOL_TIMEOUT_MS,
      capBytes,
    });
    if (r.exitCode !== 0 || r.timedOut || r.capped.stdout) {
      const why = r.timedOut
        ? `no answer within ${TOOL_TIMEOUT_MS} ms`
        : r.capped.stdout
          ? 'its answer was larger than expected'
          : `it exited ${r.exitCode ?? r.signal}${r.oomKilled ? ' (out of memory)' : ''}: ${r.stderr.toString('utf8').slice(-300)}`;
      throw new PodToolError(`the workspace tool failed in the session's pod: ${why}`);
    }
    return unwrapAnswer(parseAnswer<O>(r.stdout.toString('utf8')));
  }
}

function readTool(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(
      `the Kubernetes backend needs the workspace tool ${file}, which \`npm run build\` writes: ${(err as Error).message}`,
    );
  }
}
