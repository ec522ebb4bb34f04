import { closeSync, type Stats } from 'node:fs';
import * as path from 'node:path';
import { assertPlainFd, openDirInsideSync, openFileInSync } from '../fd-opens';
import type { RealPath } from '../path-guard';
import { FileOpError } from '../workspace.errors';
import { parentOf } from './op-paths';

/** What opening an existing file needs: where it really is, what the caller called it, its lstat. */
export type FileRef = Pick<RealPath, 'realRoot' | 'realRel' | 'rel' | 'stat'>;

/** A file opened by `withExistingFile`: a raw fd (valid only during the callback) and its fstat. */
export interface OpenFile {
  fd: number;
  st: Stats;
}

/** Opens an existing regular, single-link file through its pinned parent and runs `fn` on it. */
export async function withExistingFile<T>(
  rp: FileRef,
  field: string,
  flags: number,
  fn: (file: OpenFile) => Promise<T>,
): Promise<T> {
  if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
  if (rp.stat.isDirectory()) throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
  const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), field);
  let file: OpenFile;
  try {
    file = openPlainFile(dir, path.basename(rp.realRel), flags, rp.rel, field);
  } finally {
    closeSync(dir); // the open file pins what it needs; the directory is done with
  }
  try {
    return await fn(file);
  } finally {
    closeSync(file.fd);
  }
}

/** Opens `name` in the pinned `dir` and checks it is a regular single-link file, closing it if not. */
export function openPlainFile(
  dir: number,
  name: string,
  flags: number,
  rel: string,
  field = 'path',
): OpenFile {
  const fd = openFileInSync(dir, name, flags, field, rel);
  try {
    return { fd, st: assertPlainFd(fd, field, rel) };
  } catch (err) {
    closeSync(fd);
    throw err;
  }
}
