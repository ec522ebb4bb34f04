import type { SwitchyardError } from '@switchyard/common';
import { SandboxInternalError } from '@switchyard/sandbox';
import { FileOpError, type FileOpErrorCode, PathRejectedError } from '@switchyard/workspace';

/** A refusal as the pod's file transfer program answers it (`{"ok": false, "error": {...}}`). */
export interface TransferRefusal {
  code: string;
  message: string;
  /** The archive entry at fault (uploads of a tar). */
  entry?: string;
  [detail: string]: unknown;
}

/** Refusals the program answers with the host's file-op codes, passed on as they are. */
const FILE_OP_CODES: ReadonlySet<string> = new Set<FileOpErrorCode>([
  'FILE_NOT_FOUND',
  'FILE_EXISTS',
  'NOT_A_FILE',
  'RANGE_NOT_SATISFIABLE',
  'ARCHIVE_INVALID',
  'WORKSPACE_FULL',
  'ENOTDIR',
  'EISDIR',
  'EACCES',
]);

type PathCode = ConstructorParameters<typeof PathRejectedError>[2];
const PATH_CODES: ReadonlySet<string> = new Set<PathCode>([
  'PATH_ABSOLUTE',
  'PATH_ESCAPE',
  'PATH_NUL',
  'PATH_IS_ROOT',
  'PATH_SYMLINK_ESCAPE',
  'PATH_SYMLINK_CHAIN',
]);

/**
 * The error the host's transfer would have thrown for the same refusal: a path refused (the request's `path`, or an
 * archive entry of the `body`) is a `PathRejectedError`, a file-op refusal a `FileOpError` with the same code and
 * details; anything else is the engine's failure, not the caller's.
 */
export function transferError(refusal: TransferRefusal, rel: string): SwitchyardError {
  const { code, message, ...details } = refusal;
  if (PATH_CODES.has(code)) {
    const entry = refusal.entry;
    return new PathRejectedError(
      entry === undefined ? 'path' : 'body',
      entry ?? rel,
      code as PathCode,
      message,
    );
  }
  if (FILE_OP_CODES.has(code)) {
    const extra = code === 'ARCHIVE_INVALID' ? { field: 'body' } : {};
    return new FileOpError(code as FileOpErrorCode, message, { path: rel, ...details, ...extra });
  }
  return new SandboxInternalError(
    'POD_TRANSFER',
    `the file transfer in the session's pod failed: ${code}: ${message}`,
  );
}
