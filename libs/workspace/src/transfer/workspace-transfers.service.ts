import { Inject, Injectable, Optional } from '@nestjs/common';
import type { Readable } from 'node:stream';
import type { RealPath } from '../path-guard';
import { diskUsage } from '../workspace-fs';
import { WorkspaceUsage } from '../workspace-usage';
import { FileOpError, formatBytes } from '../workspace.errors';
import { WORKSPACE_OPTIONS, type WorkspaceOptions } from '../workspace.options';
import { openFileRead } from './file-read-stream';
import { type Admission, writeFileStream } from './file-write-stream';
import { ByteBudget } from './stream-copy';
import { extractTar } from './tar-extract';
import { packDirectory } from './tar-pack';
import type {
  ArchiveReadStream,
  ArchiveWriteResult,
  ByteRange,
  FileReadStream,
  FileWriteResult,
} from './transfer.types';

/**
 * Files and directories moved in and out of a workspace directory as streams, for any size up to the workspace's
 * cap (the file API's whole-file cap does not apply): a file's bytes (a range of them), a file written as it
 * arrives, a directory as a tar and a tar extracted. Every path goes through the path guard; what is written counts
 * in the workspace's usage (shared with the file API), and on a loop-mounted workspace the image's ENOSPC is the hard
 * stop (`WORKSPACE_FULL`, a 413).
 */
@Injectable()
export class WorkspaceTransfers {
  private readonly usage: WorkspaceUsage;

  constructor(
    @Inject(WORKSPACE_OPTIONS) private readonly options: WorkspaceOptions,
    @Optional() usage?: WorkspaceUsage,
  ) {
    this.usage = usage ?? new WorkspaceUsage();
  }

  /** One file's bytes (those of `range`), refused before any flows: `FILE_NOT_FOUND`, `NOT_A_FILE`, `RANGE_NOT_SATISFIABLE`. */
  readFile(workspaceDir: string, path: string, range?: ByteRange): Promise<FileReadStream> {
    return transferErrors(
      openFileRead(workspaceDir, path, { maxPathLength: this.options.limits.maxPathLength, range }),
    );
  }

  /** Writes `body` to `path` as it arrives, atomically; `overwrite: false` refuses an existing file (`FILE_EXISTS`). */
  writeFile(
    workspaceDir: string,
    path: string,
    body: Readable,
    options: { overwrite: boolean },
  ): Promise<FileWriteResult> {
    return transferErrors(
      writeFileStream(workspaceDir, path, body, {
        maxPathLength: this.options.limits.maxPathLength,
        overwrite: options.overwrite,
        admit: (rp, rel, replaced) => this.admit(rp, rel, replaced),
      }),
    );
  }

  /** A directory (`''`: the root) as a tar stream. */
  packDirectory(workspaceDir: string, path: string): Promise<ArchiveReadStream> {
    return transferErrors(
      packDirectory(workspaceDir, path, { maxPathLength: this.options.limits.maxPathLength }),
    );
  }

  /** Extracts a tar (or tar.gz) into a directory (`''`: the root), all or nothing. */
  extractArchive(workspaceDir: string, path: string, tar: Readable): Promise<ArchiveWriteResult> {
    return transferErrors(
      extractTar(workspaceDir, path, tar, {
        maxPathLength: this.options.limits.maxPathLength,
        maxEntries: this.options.maxScanEntries,
        admit: (rp, rel, replaced) => this.admit(rp, rel, replaced),
      }),
    );
  }

  /**
   * Lets a transfer of unknown size in: refused at once when the workspace is already at its cap, else given the room
   * left (plus what the file it replaces frees). Its ticket holds the workspace's count while it streams.
   */
  private async admit(rp: RealPath, rel: string, replacedSize: number): Promise<Admission> {
    const cap = this.options.limits.maxWorkspaceBytes;
    let remaining = 0;
    const measure = async () => (await diskUsage(rp.realRoot, this.options.maxScanEntries)).bytes;
    const ticket = await this.usage.reserve(rp, 0, measure, (bytes) => {
      remaining = cap - bytes + replacedSize;
      if (remaining <= 0) {
        throw new FileOpError(
          'WORKSPACE_FULL',
          `the workspace holds ${formatBytes(bytes)}, at its ${formatBytes(cap)} cap; delete files first`,
          { path: rel, usage: bytes, cap },
        );
      }
    });
    return { budget: new ByteBudget(remaining, cap, rel), settle: (delta) => ticket.settle(delta) };
  }
}

/**
 * The path guard's ENOTDIR (a file where the path needs a directory) and EISDIR, in the transfer API's names: the
 * workspace's state is in the way, not the request (409 `NOT_A_DIRECTORY`, `NOT_A_FILE`).
 */
async function transferErrors<T>(work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    if (err instanceof FileOpError && (err.code === 'ENOTDIR' || err.code === 'EISDIR')) {
      const code = err.code === 'ENOTDIR' ? 'NOT_A_DIRECTORY' : 'NOT_A_FILE';
      throw new FileOpError(code, err.message, err.details, { cause: err });
    }
    throw err;
  }
}
