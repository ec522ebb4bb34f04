import type { Readable } from 'node:stream';
import type {
  ArchiveWriteResult,
  ByteRange,
  FileOp,
  FileOpOutcome,
  FileReadStream,
  FileWriteResult,
  WorkspaceSnapshot,
} from '@switchyard/workspace';

/** The transfer types are the workspace lib's, which both backends' transfers answer in. */
export type { ArchiveWriteResult, ByteRange, FileReadStream, FileWriteResult };

/**
 * Where a session's files live and how the engine reaches them: a directory on the engine's host that every tier
 * mounts (the Docker backend), or a volume of the session's own pod (the Kubernetes backend, where a pod on another
 * node cannot see the engine's disk). The handlers, sessions, checkpoints and MCP go through this port only, so the
 * file API, the files code changed, browser artifacts and lineage are the same on either.
 */
export abstract class SessionWorkspaces {
  /** `host`: a directory of the engine's; `pod`: the session pod's `/workspace`. */
  abstract readonly kind: 'host' | 'pod';

  /**
   * The root the session's paths are checked against lexically (traversal is refused before anything runs) and that
   * the tiers are given: a host path, or `/workspace` inside the pod.
   */
  abstract root(sessionId: string): string;

  /** Makes the session's workspace (claims its pod), or opens it again after a restart; `image` is a template's. */
  abstract open(sessionId: string, options?: { image?: string; reopen?: boolean }): Promise<void>;

  /** Removes the session's workspace (its pod). Idempotent. */
  abstract close(sessionId: string): Promise<void>;

  /** Start-up: removes workspaces of sessions the engine does not hold (a crash before their session was recorded). */
  abstract removeOrphans(known: ReadonlySet<string>): Promise<string[]>;

  /** One file API operation, path-guarded, capped, with the files it read and wrote. */
  abstract fileOp(sessionId: string, op: FileOp): Promise<FileOpOutcome>;

  /**
   * A picture of every file to diff later with `changedPaths` (around code actions, which write behind the API).
   * `afterRun`: the picture right after a code action's run, which a pod's runner may already have taken as the run
   * ended (nothing having run in the pod since); a host workspace walks it either way.
   */
  abstract snapshot(sessionId: string, options?: { afterRun?: boolean }): Promise<WorkspaceSnapshot>;

  abstract changedPaths(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[];

  /**
   * Where the engine's own tools that work on files of this host (the browser: screenshots, downloads, uploads) find
   * the session's files: its workspace itself (host), or a staging directory kept in step with the pod by `pull` and
   * `push` (pod).
   */
  abstract hostDir(sessionId: string): string;

  /** Brings these workspace files into `hostDir` before a tool reads them there (pod); nothing to do on a host. */
  abstract pull(sessionId: string, paths: string[], maxBytes: number): Promise<void>;

  /** Moves these files a tool wrote under `hostDir` into the workspace (pod); nothing to do on a host. */
  abstract push(sessionId: string, paths: string[], maxBytes: number): Promise<void>;

  /**
   * One file's bytes as a stream (the file transfer API: `GET …/files/content`), path-guarded like `fileOp`, not
   * capped by the file API's whole-file read cap. Rejects with `FileOpError` (`FILE_NOT_FOUND`, `NOT_A_FILE`,
   * `RANGE_NOT_SATISFIABLE`) before any byte flows.
   */
  abstract readStream(sessionId: string, path: string, range?: ByteRange): Promise<FileReadStream>;

  /**
   * Writes `body` to `path` as it arrives, atomically (a temporary file beside it, renamed over it when whole: a
   * reader never sees half a file, a failed upload leaves the old file as it was), making parent directories. Up to
   * the workspace quota; `overwrite: false` refuses an existing file (`FILE_EXISTS`).
   */
  abstract writeStream(
    sessionId: string,
    path: string,
    body: Readable,
    options: { overwrite: boolean },
  ): Promise<FileWriteResult>;

  /** A directory of the workspace as a tar stream, its entries relative to that directory (`GET …/files/archive`). */
  abstract archiveOut(sessionId: string, path: string): Promise<Readable>;

  /**
   * Extracts a tar stream into a directory of the workspace (made when missing) with the path guard's rules: no
   * absolute names, no `..`, no link leading out of the workspace, no devices or fifos; up to the quota.
   */
  abstract archiveIn(sessionId: string, path: string, tar: Readable): Promise<ArchiveWriteResult>;
}
