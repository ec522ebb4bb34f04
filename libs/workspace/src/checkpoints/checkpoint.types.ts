/** A checkpoint of a session's workspace: its files, directories, modes, owners, times and links as they were. */
export interface Checkpoint {
  /** `chk_…` */
  id: string;
  sessionId: string;
  label?: string;
  /** ISO 8601. */
  createdAt: string;
  /** Entries that are not directories (files, links). */
  files: number;
  directories: number;
  /** Bytes of its regular files (what a full copy would take; a snapshot shares them with the workspace). */
  bytes: number;
  /** Taken by the engine (`checkpoint: "before"`, a plan's `each-step`): pruned past the keep count. */
  auto: boolean;
  /** The action it was taken just before, when it was. */
  actionId?: string;
  /**
   * The caller's mark of what the checkpoint follows, kept with it (the engine: the `seq` of the last action whose
   * writes it holds, so that its graph record can be made again should a crash come between the two).
   */
  seq?: number;
}

/** What the tree tool counts in a tree. */
export interface TreeCounts {
  files: number;
  directories: number;
  bytes: number;
}

export type TreeEntryType = 'file' | 'dir' | 'symlink' | 'other';

/** A path on one side only (everything under an added or removed directory is listed too). */
export interface TreeDiffEntry {
  path: string;
  type: TreeEntryType;
  /** Regular files only. */
  size?: number;
}

/** A path on both sides whose contents, mode or link target changed. */
export interface TreeModifiedEntry {
  path: string;
  type: TreeEntryType;
  sizeBefore?: number;
  sizeAfter?: number;
  /** Octal, when the permission bits changed. */
  modeBefore?: string;
  modeAfter?: string;
  /** Links: where they point. */
  targetBefore?: string;
  targetAfter?: string;
  /** Unified diff, for text files up to the diff size limit. */
  diff?: string;
  /** Why a changed file has no `diff`: larger than the limit, not UTF-8 text, or the answer's diff budget spent. */
  diffOmitted?: 'too_large' | 'binary' | 'budget';
  /** Only the mode changed. */
  contentUnchanged?: boolean;
}

export interface TreeDiff {
  added: TreeDiffEntry[];
  removed: TreeDiffEntry[];
  modified: TreeModifiedEntry[];
  /** More changes than `maxEntries`: the lists stop there. */
  truncated: boolean;
}

/** What a restore did to the workspace. */
export interface RestoreStats {
  /** Entries written back (files reflinked where the filesystem allows, directories made, links). */
  copied: number;
  /** Entries the checkpoint did not have. */
  removed: number;
  /** Entries already as they were. */
  kept: number;
  /** Bytes actually copied: 0 when every file came back as a reflink. */
  bytesCopied: number;
}
