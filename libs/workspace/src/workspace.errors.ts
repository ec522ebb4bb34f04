import { type ErrorKind, InvalidInputError, SwitchyardError } from '@switchyard/common';

/** Why a path was refused before anything touched the disk (or when the disk showed it would escape). */
export type PathRejectionCode =
  | 'PATH_EMPTY'
  | 'PATH_ABSOLUTE'
  | 'PATH_ESCAPE'
  | 'PATH_NUL'
  | 'PATH_CONTROL_CHAR'
  | 'PATH_INVISIBLE_CHAR'
  | 'PATH_BACKSLASH'
  | 'PATH_ENCODED_TRAVERSAL'
  | 'PATH_TOO_LONG'
  | 'PATH_IS_ROOT'
  | 'PATH_SYMLINK_ESCAPE'
  | 'PATH_SYMLINK_DANGLING'
  | 'PATH_SYMLINK_CHAIN'
  | 'PATH_HARDLINK';

/**
 * A request path that must never be used: it is absolute, escapes the workspace (lexically or through a
 * link), is malformed, or names a hardlinked file. Always a 400 at the edge; `details` carry `field` and
 * the offending `path`.
 */
export class PathRejectedError extends InvalidInputError {
  declare readonly code: PathRejectionCode;

  constructor(field: string, path: string, code: PathRejectionCode, message: string) {
    // Long or binary-laden paths are echoed back shortened: the caller needs a hint, not a copy.
    super(field, message, code, { path: path.length > 200 ? `${path.slice(0, 200)}…` : path });
  }
}

export type FileOpErrorCode =
  | 'ENOENT'
  | 'EEXIST'
  | 'EISDIR'
  | 'ENOTDIR'
  | 'ENOTEMPTY'
  | 'EACCES'
  | 'NOT_REGULAR_FILE'
  | 'INVALID_MOVE'
  | 'EDIT_NOT_FOUND'
  | 'EDIT_AMBIGUOUS'
  | 'FILE_TOO_LARGE'
  | 'WORKSPACE_FULL'
  | 'INVALID_PATTERN'
  | 'INVALID_CURSOR'
  // The file transfer API's (`transfer/`): the names its contract gives them.
  | 'FILE_NOT_FOUND'
  | 'FILE_EXISTS'
  | 'NOT_A_FILE'
  | 'NOT_A_DIRECTORY'
  | 'RANGE_NOT_SATISFIABLE'
  | 'ARCHIVE_INVALID';

const KIND: Partial<Record<FileOpErrorCode, ErrorKind>> = {
  ENOENT: 'not_found',
  EEXIST: 'conflict',
  FILE_NOT_FOUND: 'not_found',
  FILE_EXISTS: 'conflict',
  // A transfer meeting something else than it names (a directory where a file goes, or the reverse): the
  // workspace's state, not the request, is in the way.
  NOT_A_FILE: 'conflict',
  NOT_A_DIRECTORY: 'conflict',
  ENOTEMPTY: 'conflict',
  FILE_TOO_LARGE: 'payload_too_large',
  WORKSPACE_FULL: 'payload_too_large',
};
const LIMIT_CODES: ReadonlySet<FileOpErrorCode> = new Set(['FILE_TOO_LARGE', 'WORKSPACE_FULL']);

/**
 * A file operation that was well-formed but could not be carried out (missing file, ambiguous edit, cap
 * reached). The engine records it as the file action's outcome, with `errorClass` as its `ActionError.class`.
 */
export class FileOpError extends SwitchyardError {
  readonly kind: ErrorKind;
  /** `limit` for size caps, `validation` for everything else. */
  readonly errorClass: 'validation' | 'limit';

  constructor(
    readonly code: FileOpErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, details, options);
    this.kind = KIND[code] ?? 'invalid_input';
    this.errorClass = LIMIT_CODES.has(code) ? 'limit' : 'validation';
  }
}

/** `1536` → `1.5 KiB`: caps in messages read better in binary units. */
export function formatBytes(n: number): string {
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) {
    n /= 1024;
    i++;
  }
  return `${i === 0 ? n : Number(n.toFixed(1))} ${units[i]}`;
}

export type CheckpointErrorCode =
  'CHECKPOINT_NOT_FOUND' | 'CHECKPOINT_LIMIT' | 'CHECKPOINT_SPACE' | 'CHECKPOINT_FAILED';

const CHECKPOINT_KIND: Record<CheckpointErrorCode, ErrorKind> = {
  CHECKPOINT_NOT_FOUND: 'not_found',
  CHECKPOINT_LIMIT: 'conflict',
  CHECKPOINT_SPACE: 'payload_too_large',
  // The filesystem refused (a link swapped in by running code mid-restore, say): worth another try, not a 500.
  CHECKPOINT_FAILED: 'conflict',
};

/**
 * A checkpoint operation refused or failed: no such checkpoint (404), too many for the session (409, naming the
 * setting), no room left in the workspace's quota for it (413), or the filesystem failed it (409 `CHECKPOINT_FAILED`).
 */
export class CheckpointError extends SwitchyardError {
  readonly kind: ErrorKind;

  constructor(
    readonly code: CheckpointErrorCode,
    message: string,
    details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, details, options);
    this.kind = CHECKPOINT_KIND[code];
  }
}
