import { Inject, Injectable, type OnApplicationShutdown, Optional } from '@nestjs/common';
import { InvalidInputError } from '@switchyard/common';
import type { FileOp, FileOpOutcome } from './file-op.types';
import { FileListing } from './file-ops/file-listing';
import { FileReads } from './file-ops/file-reads';
import { FileSearch } from './file-ops/file-search';
import { FileTree } from './file-ops/file-tree';
import { FileWrites } from './file-ops/file-writes';
import { OpPaths } from './file-ops/op-paths';
import { assertProcFd } from './fd-opens';
import { toFileOpError } from './fs-errors';
import { WorkspaceUsage } from './workspace-usage';
import { WORKSPACE_OPTIONS, type WorkspaceOptions } from './workspace.options';

/**
 * The file API over one workspace directory: hands each op to its family (`file-ops/`: reads, listing,
 * search, writes, tree) and turns errors from the disk into `FileOpError`s. Paths in `output` are the
 * caller's (normalized); paths in `touched` are the real ones (symlinks resolved), so the graph gets one
 * node per actual file.
 *
 * Binary files: `read` returns anything that is not valid UTF-8 or contains a NUL byte as base64
 * (`encoding: 'base64'`, whole file, no line window), because code often produces images or archives an
 * agent wants back; `grep` skips them and `edit` refuses them.
 *
 * Workspace cap: checked against a per-workspace running count (`WorkspaceUsage`) that this API keeps up
 * to date itself; changes made behind its back (code actions) must be reported with `markUsageStale`,
 * after which the next write re-measures with a bounded walk.
 */
@Injectable()
export class FileOperations implements OnApplicationShutdown {
  private readonly usage: WorkspaceUsage;
  private readonly reads: FileReads;
  private readonly listing: FileListing;
  private readonly search: FileSearch;
  private readonly writes: FileWrites;
  private readonly tree: FileTree;

  constructor(
    @Inject(WORKSPACE_OPTIONS) options: WorkspaceOptions,
    // Shared with `WorkspaceManager` in `WorkspaceModule`; a standalone instance keeps its own.
    @Optional() usage?: WorkspaceUsage,
  ) {
    assertProcFd();
    this.usage = usage ?? new WorkspaceUsage();
    const paths = new OpPaths(options);
    this.reads = new FileReads(options, paths);
    this.listing = new FileListing(options, paths);
    this.search = new FileSearch(options, paths);
    this.writes = new FileWrites(options, paths, this.usage);
    this.tree = new FileTree(paths, this.usage);
  }

  async onApplicationShutdown(): Promise<void> {
    await this.search.close();
  }

  /**
   * Tells the file API that `workspaceDir` may have changed behind its back (a code action ran in it,
   * something outside the engine wrote to it): the workspace cap re-measures it on the next write.
   * `WorkspaceManager.markUsageStale(sessionId)` does the same by session id.
   */
  markUsageStale(workspaceDir: string): void {
    this.usage.markStale(workspaceDir);
  }

  async execute(workspaceDir: string, op: FileOp): Promise<FileOpOutcome> {
    try {
      switch (op.op) {
        case 'read':
          return await this.reads.read(workspaceDir, op);
        case 'stat':
          return await this.reads.stat(workspaceDir, op);
        case 'list':
          return await this.listing.list(workspaceDir, op);
        case 'find':
          return await this.listing.find(workspaceDir, op);
        case 'grep':
          return await this.search.grep(workspaceDir, op);
        case 'write':
          return await this.writes.write(workspaceDir, op);
        case 'edit':
          return await this.writes.edit(workspaceDir, op);
        case 'mkdir':
          return await this.tree.mkdir(workspaceDir, op);
        case 'move':
          return await this.tree.move(workspaceDir, op);
        case 'delete':
          return await this.tree.delete(workspaceDir, op);
        default:
          throw new InvalidInputError('op', `unknown file op ${String((op as { op: unknown }).op)}`);
      }
    } catch (err) {
      throw toFileOpError(err, 'path' in op && typeof op.path === 'string' ? op.path : '');
    }
  }
}
