import { createReadStream, createWriteStream } from 'node:fs';
import { lstat, mkdir, readdir } from 'node:fs/promises';
import * as path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import * as tar from 'tar-stream';

/**
 * A local directory as a tar stream, entries relative to it (directories and regular files; symbolic links and
 * special files are left out: the engine's path guard would refuse them). Files are read one at a time as the
 * consumer pulls, so a directory of any size goes through in constant memory.
 */
export function packDirectory(root: string): Readable {
  const pack = tar.pack();
  const add = async (rel: string): Promise<void> => {
    const entries = await readdir(path.join(root, rel), { withFileTypes: true });
    entries.sort((a, b) => (a.name < b.name ? -1 : 1));
    for (const entry of entries) {
      const name = rel === '' ? entry.name : `${rel}/${entry.name}`;
      const full = path.join(root, name);
      const stat = await lstat(full);
      if (stat.isDirectory()) {
        pack.entry({ name, type: 'directory', mode: stat.mode & 0o777, mtime: stat.mtime });
        await add(name);
      } else if (stat.isFile()) {
        await new Promise<void>((resolve, reject) => {
          const sink = pack.entry(
            { name, type: 'file', size: stat.size, mode: stat.mode & 0o777, mtime: stat.mtime },
            (error) => (error ? reject(error) : resolve()),
          );
          createReadStream(full).on('error', reject).pipe(sink);
        });
      }
    }
  };
  add('').then(
    () => pack.finalize(),
    (error: unknown) => pack.destroy(error instanceof Error ? error : new Error(String(error))),
  );
  return pack;
}

export interface ExtractSummary {
  files: number;
  directories: number;
  bytes: number;
}

/**
 * Extracts a tar stream into `dest` (made when missing). Every entry must stay inside it: an absolute name or one
 * with `..` is refused, as are links (a tar from the engine has none); the tar is read as it comes.
 */
export async function extractTo(dest: string, source: Readable): Promise<ExtractSummary> {
  const root = path.resolve(dest);
  await mkdir(root, { recursive: true });
  const summary: ExtractSummary = { files: 0, directories: 0, bytes: 0 };
  const extract = tar.extract();
  extract.on('entry', (header, stream, next) => {
    const target = path.resolve(root, header.name);
    const inside = target === root || target.startsWith(root + path.sep);
    const fail = (message: string) => {
      stream.resume();
      next(new Error(`${header.name}: ${message}`));
    };
    if (!inside || path.isAbsolute(header.name)) return fail('outside the destination directory');
    const mode = (header.mode ?? 0o644) & 0o777;
    if (header.type === 'directory') {
      stream.resume();
      mkdir(target, { recursive: true, mode: mode | 0o700 }).then(() => {
        summary.directories++;
        next();
      }, next);
    } else if (header.type === 'file' || header.type === 'contiguous-file') {
      mkdir(path.dirname(target), { recursive: true })
        .then(() => pipeline(stream, createWriteStream(target, { mode: mode | 0o600 })))
        .then(() => {
          summary.files++;
          summary.bytes += header.size ?? 0;
          next();
        }, next);
    } else {
      fail(`a ${header.type ?? 'link'} entry; only files and directories are extracted`);
    }
  });
  await pipeline(source, extract);
  return summary;
}
