import {
  closeSync,
  constants as C,
  createReadStream,
  fstatSync,
  openSync,
  readlinkSync,
  type Stats,
} from 'node:fs';
import { readdir } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import { type Headers, pack, type Pack } from 'tar-stream';
import { DIR_FLAGS, fdPath, NOFOLLOW_FLAGS, openDirInsideSync } from '../fd-opens';
import { rootSkips } from '../file-ops/op-paths';
import { realPathInside } from '../path-guard';
import { FileOpError } from '../workspace.errors';
import type { ArchiveReadStream } from './transfer.types';

/**
 * A directory of the workspace `ws` as a tar stream, entries relative to it (the workspace root: without the session's
 * home, as every walk from the root). Streamed as the client reads it: one file open at a time, read no faster than
 * the tar is consumed. Walked through pinned directory fds with O_NOFOLLOW: links are archived as links, never
 * followed; fifos, sockets, devices and hard-linked files (which the file API refuses too) are left out.
 */
export async function packDirectory(
  ws: string,
  relPath: string,
  options: { maxPathLength: number },
): Promise<ArchiveReadStream> {
  const rp = await realPathInside(ws, relPath, 'path', {
    maxPathLength: options.maxPathLength,
    allowEmpty: true,
  });
  if (!rp.stat) throw new FileOpError('FILE_NOT_FOUND', `${rp.rel || '.'} does not exist`, { path: rp.rel });
  if (!rp.stat.isDirectory()) {
    throw new FileOpError('NOT_A_DIRECTORY', `${rp.rel} is not a directory; download it from files/content`, {
      path: rp.rel,
    });
  }
  const dir = openDirInsideSync(rp.realRoot, rp.realRel, 'path');
  const tar = pack();
  // A consumer gone (the client hung up) ends the walk at its next step.
  let gone = false;
  tar.on('close', () => (gone = true));
  void (async () => {
    try {
      await walk(tar, dir, '', rootSkips(rp.realRel), () => gone);
      tar.finalize();
    } catch (err) {
      tar.destroy(err instanceof Error ? err : new Error(String(err)));
    } finally {
      closeSync(dir);
    }
  })();
  return { path: rp.rel, stream: tar };
}

async function walk(
  tar: Pack,
  dir: number,
  prefix: string,
  skips: ReadonlySet<string> | undefined,
  gone: () => boolean,
): Promise<void> {
  const entries = await readdir(fdPath(dir), { withFileTypes: true });
  entries.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
  for (const entry of entries) {
    if (gone()) return;
    if (skips?.has(entry.name)) continue;
    const name = prefix ? `${prefix}/${entry.name}` : entry.name;
    if (entry.isDirectory()) {
      const sub = openQuietly(dir, entry.name, DIR_FLAGS);
      if (sub === undefined) continue; // swapped for something else meanwhile
      try {
        // Directories end in `/`, as tar writes them.
        await addEntry(tar, { ...headerOf(`${name}/`, fstatSync(sub)), type: 'directory' });
        await walk(tar, sub, name, undefined, gone);
      } finally {
        closeSync(sub);
      }
    } else if (entry.isSymbolicLink()) {
      let target: string;
      try {
        target = readlinkSync(fdPath(dir, entry.name));
      } catch {
        continue;
      }
      await addEntry(tar, { name, type: 'symlink', linkname: target, mode: 0o777 });
    } else if (entry.isFile()) {
      const fd = openQuietly(dir, entry.name, C.O_RDONLY);
      if (fd === undefined) continue;
      const st = fstatSync(fd);
      if (!st.isFile() || st.nlink > 1) {
        closeSync(fd);
        continue;
      }
      await addFile(tar, { ...headerOf(name, st), type: 'file', size: st.size }, fd);
    }
  }
}

function headerOf(name: string, st: Stats): Headers {
  return { name, mode: st.mode & 0o7777, mtime: st.mtime, uid: 0, gid: 0 };
}

/** Opens `name` in the pinned `dir` without following a link; undefined when it is gone or is not what it was. */
function openQuietly(dir: number, name: string, flags: number): number | undefined {
  try {
    return openSync(fdPath(dir, name), flags | NOFOLLOW_FLAGS);
  } catch {
    return undefined;
  }
}

/** An entry without content (a directory, a link, an empty file): given an empty buffer, or tar-stream waits for one. */
function addEntry(tar: Pack, header: Headers): Promise<void> {
  return new Promise((resolve, reject) => {
    tar.entry(header, Buffer.alloc(0), (err?: Error | null) => (err ? reject(err) : resolve()));
  });
}

/** The file's first `size` bytes (its size when opened) as the entry's content; the fd is closed when done. */
async function addFile(tar: Pack, header: Headers & { size: number }, fd: number): Promise<void> {
  if (header.size === 0) {
    closeSync(fd);
    await addEntry(tar, header);
    return;
  }
  let sink: NodeJS.WritableStream | undefined;
  const written = new Promise<void>((resolve, reject) => {
    sink = tar.entry(header, (err?: Error | null) => (err ? reject(err) : resolve()));
  });
  written.catch(() => undefined);
  const source = createReadStream('', { fd, start: 0, end: header.size - 1, autoClose: true });
  await pipeline(source, sink!);
  await written;
}
