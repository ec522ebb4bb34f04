import { FileOpError } from './workspace.errors';

export function errno(err: unknown): string | undefined {
  return typeof err === 'object' && err !== null && 'code' in err ? String(err.code) : undefined;
}

const ERRNO_MESSAGES: Partial<Record<string, [FileOpErrorCodeLike, string]>> = {
  ENOENT: ['ENOENT', 'does not exist'],
  EEXIST: ['EEXIST', 'already exists'],
  EISDIR: ['EISDIR', 'is a directory'],
  ENOTDIR: ['ENOTDIR', 'has a parent that is not a directory'],
  ENOTEMPTY: ['ENOTEMPTY', 'is a directory that is not empty'],
  EACCES: ['EACCES', 'is not accessible'],
  EPERM: ['EACCES', 'is not accessible'],
  ENOSPC: ['WORKSPACE_FULL', 'cannot be written: the disk is full'],
  EDQUOT: ['WORKSPACE_FULL', 'cannot be written: the disk quota is exhausted'],
};
type FileOpErrorCodeLike = ConstructorParameters<typeof FileOpError>[0];

/** Turns an errno from the disk into the matching `FileOpError`; anything unexpected passes through. */
export function toFileOpError(err: unknown, relPath: string): unknown {
  const hit = ERRNO_MESSAGES[errno(err) ?? ''];
  if (!hit || err instanceof FileOpError) return err;
  return new FileOpError(hit[0], `${relPath || '.'} ${hit[1]}`, { path: relPath }, { cause: err });
}
