export * from './file-op.types';
export { FileOperations } from './file-operations.service';
// Streamed transfers of files and directories (tar), any size up to the workspace's cap.
export { WorkspaceTransfers } from './transfer/workspace-transfers.service';
export type {
  ArchiveReadStream,
  ArchiveWriteResult,
  ByteRange,
  FileReadStream,
  FileWriteResult,
} from './transfer/transfer.types';
export { rangeWithin } from './transfer/file-read-stream';
export { extractTar, type ExtractOptions } from './transfer/tar-extract';
export { packDirectory } from './transfer/tar-pack';
export { type Admission, writeFileStream } from './transfer/file-write-stream';
export { ByteBudget } from './transfer/stream-copy';
export { compileGlob, type GlobMatcher } from './glob';
// For other libs that move bytes in and out of a workspace (the browser's uploads and artifacts): bounded
// content I/O on a raw fd.
export { readFdUpTo, writeFdAll } from './file-content';
// …and write a whole file into it the way the file API does: atomically, with the workspace's mode and owner.
export { type AtomicWriteOptions, writeFileAtomic } from './atomic-write';
export { type EntryPolicy, newEntryPolicy } from './entry-policy';
export {
  applyOwnershipSync,
  assertPlainFd,
  type CreateAs,
  fdPath,
  openDirInsideSync,
  openFileInSync,
} from './fd-opens';
export { toFileOpError } from './fs-errors';
export {
  DEFAULT_MAX_PATH_LENGTH,
  isInside,
  type PathGuardOptions,
  type RealPath,
  realPathInside,
  type ResolvedPath,
  resolveInside,
} from './path-guard';
export { WorkspaceManager } from './workspace-manager.service';
export { isMountPoint, LoopImageQuota, NoWorkspaceQuota, WorkspaceQuota } from './workspace-quota';
export { USAGE_AGE_PER_WALK, USAGE_MAX_AGE_MS, type UsageTicket, WorkspaceUsage } from './workspace-usage';
export {
  FileOpError,
  type FileOpErrorCode,
  PathRejectedError,
  type PathRejectionCode,
} from './workspace.errors';
export { WorkspaceModule } from './workspace.module';
export {
  DEFAULT_WORKSPACE_LIMITS,
  resolveWorkspaceOptions,
  WORKSPACE_BOUNDS,
  WORKSPACE_OPTIONS,
  type WorkspaceModuleOptions,
  type WorkspaceOptions,
} from './workspace.options';
export type {
  Checkpoint,
  RestoreStats,
  TreeDiff,
  TreeDiffEntry,
  TreeModifiedEntry,
} from './checkpoints/checkpoint.types';
export { isCheckpointId } from './checkpoints/checkpoint-records';
export { PodCheckpointStore, type PodCheckpointStoreOptions } from './checkpoints/pod-checkpoint-store';
export { CHECKPOINT_VAULT, CheckpointVault } from './checkpoints/checkpoint-vault';
export { DiskCheckpointVault } from './checkpoints/disk-checkpoint-vault';
export { POD_WORKSPACE_IO, PodWorkspaceIo } from './checkpoints/pod-workspace-io';
export {
  type CheckpointDiff,
  type CheckpointRequest,
  type CreatedCheckpoint,
  WorkspaceCheckpoints,
} from './checkpoints/workspace-checkpoints.service';
export { CheckpointError, type CheckpointErrorCode } from './workspace.errors';
export * from './pod/workspace-tool.protocol';
