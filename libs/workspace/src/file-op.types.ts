/** File operations on a session's workspace. Every path is relative to the workspace root. */

export const FILE_OPS = [
  'read',
  'write',
  'edit',
  'list',
  'find',
  'grep',
  'stat',
  'mkdir',
  'move',
  'delete',
] as const;
export type FileOpName = (typeof FILE_OPS)[number];

export interface ReadOp {
  op: 'read';
  path: string;
  /** First line to return, 1-based (default 1). */
  offset?: number;
  /** Max lines to return (default 2000). */
  limit?: number;
  /**
   * `base64`: the whole file's bytes, base64-encoded, whatever they are (within the whole-file cap; no line window).
   * Default: text as a line window, or base64 when the file is not UTF-8 text.
   */
  encoding?: ContentEncoding;
}
/** How a file op's `content` carries bytes: UTF-8 text, or base64 of any bytes. */
export type ContentEncoding = 'utf8' | 'base64';
export interface WriteOp {
  op: 'write';
  path: string;
  content: string;
  /** overwrite (default) | append | create (fails when the file exists). */
  mode?: 'overwrite' | 'append' | 'create';
  /** `base64`: `content` is base64 of the bytes to write (binary files). Default `utf8`. */
  encoding?: ContentEncoding;
}
export interface EditOp {
  op: 'edit';
  path: string;
  find: string;
  replace: string;
  /** Replace every occurrence; without it more than one match is an error. */
  all?: boolean;
}
export interface ListOp {
  op: 'list';
  path?: string;
  recursive?: boolean;
  limit?: number;
  cursor?: string;
}
export interface FindOp {
  op: 'find';
  /** Glob relative to `path`, e.g. `**\/*.py`. */
  pattern: string;
  path?: string;
  limit?: number;
}
export interface GrepOp {
  op: 'grep';
  /** JavaScript regular expression. */
  pattern: string;
  path?: string;
  /** Only files whose relative path matches this glob. */
  glob?: string;
  ignoreCase?: boolean;
  limit?: number;
}
export interface StatOp {
  op: 'stat';
  path: string;
}
export interface MkdirOp {
  op: 'mkdir';
  path: string;
}
export interface MoveOp {
  op: 'move';
  path: string;
  to: string;
  overwrite?: boolean;
}
export interface DeleteOp {
  op: 'delete';
  path: string;
  recursive?: boolean;
}

export type FileOp =
  ReadOp | WriteOp | EditOp | ListOp | FindOp | GrepOp | StatOp | MkdirOp | MoveOp | DeleteOp;

export interface FileOpOutcome {
  /** The op's data, returned as the action's `output`. */
  output: Record<string, unknown>;
  /** Files read or written, for the graph's READ/WROTE edges. */
  touched: { path: string; access: 'read' | 'write' }[];
}

export interface WorkspaceLimits {
  /** Largest single file the file API will write or read whole (bytes). */
  maxFileBytes: number;
  /** Total bytes a workspace may hold. */
  maxWorkspaceBytes: number;
  /** Longest relative path accepted (bytes). */
  maxPathLength: number;
}

/** A cheap picture of a workspace, used to tell which files a code action changed. */
export interface WorkspaceSnapshot {
  /** relative path → `${size}:${mtimeMs}:${ino}` */
  entries: Map<string, string>;
  /** True when the scan stopped at its entry cap. */
  partial: boolean;
}
