import { Injectable } from '@nestjs/common';
import {
  type FileOp,
  type FileOpOutcome,
  FileOperations,
  WorkspaceManager,
  type WorkspaceSnapshot,
  WorkspaceTransfers,
} from '@switchyard/workspace';
import type { Readable } from 'node:stream';
import {
  type ArchiveWriteResult,
  type ByteRange,
  type FileReadStream,
  type FileWriteResult,
  SessionWorkspaces,
} from './session-workspaces';

/** The Docker backend's workspaces: a directory (a loop-mounted image, with the quota) per session on this host. */
@Injectable()
export class HostWorkspaces extends SessionWorkspaces {
  readonly kind = 'host' as const;

  constructor(
    private readonly workspaces: WorkspaceManager,
    private readonly files: FileOperations,
    private readonly transfers: WorkspaceTransfers,
  ) {
    super();
  }

  root(sessionId: string): string {
    return this.workspaces.dirOf(sessionId);
  }

  async open(sessionId: string): Promise<void> {
    // Capped workspaces are unmounted at shutdown (or by a reboot): making one again mounts it back.
    await this.workspaces.create(sessionId);
  }

  close(sessionId: string): Promise<void> {
    return this.workspaces.remove(sessionId);
  }

  removeOrphans(known: ReadonlySet<string>): Promise<string[]> {
    return this.workspaces.removeOrphans(known);
  }

  fileOp(sessionId: string, op: FileOp): Promise<FileOpOutcome> {
    return this.files.execute(this.workspaces.dirOf(sessionId), op);
  }

  snapshot(sessionId: string): Promise<WorkspaceSnapshot> {
    return this.workspaces.snapshot(sessionId);
  }

  changedPaths(before: WorkspaceSnapshot, after: WorkspaceSnapshot): string[] {
    return this.workspaces.changedPaths(before, after);
  }

  hostDir(sessionId: string): string {
    return this.workspaces.dirOf(sessionId);
  }

  /** The tools work in the workspace itself. */
  pull(): Promise<void> {
    return Promise.resolve();
  }

  push(): Promise<void> {
    return Promise.resolve();
  }

  readStream(sessionId: string, path: string, range?: ByteRange): Promise<FileReadStream> {
    return this.transfers.readFile(this.workspaces.dirOf(sessionId), path, range);
  }

  writeStream(
    sessionId: string,
    path: string,
    body: Readable,
    options: { overwrite: boolean },
  ): Promise<FileWriteResult> {
    return this.transfers.writeFile(this.workspaces.dirOf(sessionId), path, body, options);
  }

  async archiveOut(sessionId: string, path: string): Promise<Readable> {
    return (await this.transfers.packDirectory(this.workspaces.dirOf(sessionId), path)).stream;
  }

  archiveIn(sessionId: string, path: string, tar: Readable): Promise<ArchiveWriteResult> {
    return this.transfers.extractArchive(this.workspaces.dirOf(sessionId), path, tar);
  }
}
