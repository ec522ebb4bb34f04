import { randomBytes } from 'node:crypto';
import {
  closeSync,
  constants as C,
  createReadStream,
  lchownSync,
  openSync,
  rmdirSync,
  symlinkSync,
} from 'node:fs';
import { readdir, rename, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { PassThrough, pipeline, type Readable } from 'node:stream';
import type { Headers } from 'tar-stream';
import { type EntryPolicy, newEntryPolicy } from '../entry-policy';
import {
  applyOwnershipSync,
  DIR_FLAGS,
  fdPath,
  NOFOLLOW_FLAGS,
  openDirInsideSync,
  openFileInSync,
} from '../fd-opens';
import { parentOf } from '../file-ops/op-paths';
import { errno, toFileOpError } from '../fs-errors';
import { type RealPath, realPathInside, resolveInside } from '../path-guard';
import { FileOpError, PathRejectedError } from '../workspace.errors';
import type { Admission } from './file-write-stream';
import { chunksOf, copyToFd } from './stream-copy';
import { readTarEntries } from './tar-entries';
import type { ArchiveWriteResult } from './transfer.types';

export interface ExtractOptions {
  maxPathLength: number;
  /** Most entries one archive may hold (an archive of a million empty files is a denial of service, not data). */
  maxEntries: number;
  admit(rp: RealPath, rel: string, replacedSize: number): Promise<Admission>;
}

/** What the extraction of one archive has made so far, in its staging directory. */
interface Staging {
  realRoot: string;
  /** The staging directory, relative to the real root. */
  rel: string;
  /** The destination, relative to the workspace root (what links are checked against). */
  destRel: string;
  policy: EntryPolicy;
  files: Set<string>;
  links: Set<string>;
  counts: { files: number; directories: number; entries: number };
}

/**
 * Extracts a tar (gzip-compressed too) into the directory `relPath` of the workspace `ws` (made when missing) as it
 * arrives, with the path guard's rules for every entry: no absolute names, no `..`, no names the guard refuses, no
 * symlink leading out of the workspace, no entry through a link, no devices or fifos; hard links become copies (the
 * file API refuses hard-linked files). Entries land in a staging directory inside the destination and are moved into
 * place only once the whole archive was read and accepted: a refused, malformed or aborted archive writes nothing.
 * Files replace files of the same name; a file over a directory (or the reverse) is refused.
 */
export async function extractTar(
  ws: string,
  relPath: string,
  body: Readable,
  options: ExtractOptions,
): Promise<ArchiveWriteResult> {
  const rp = await realPathInside(ws, relPath, 'path', {
    maxPathLength: options.maxPathLength,
    allowEmpty: true,
  });
  if (rp.stat && !rp.stat.isDirectory()) {
    throw new FileOpError('NOT_A_DIRECTORY', `${rp.rel} is not a directory`, { path: rp.rel });
  }
  const admission = await options.admit(rp, rp.rel, 0);
  const policy = newEntryPolicy(rp.rootStat);
  let destFd: number | undefined;
  let stagingName: string | undefined;
  // Moving entries into place may replace files: the workspace's count is re-measured afterwards.
  let applied: number | undefined = 0;
  try {
    destFd = openDirInsideSync(rp.realRoot, rp.realRel, 'path', policy.dir);
    stagingName = `.switchyard-${randomBytes(8).toString('hex')}.extract`;
    const stagingRel = rp.realRel ? `${rp.realRel}/${stagingName}` : stagingName;
    closeSync(openDirInsideSync(rp.realRoot, stagingRel, 'path', policy.dir));
    const staging: Staging = {
      realRoot: rp.realRoot,
      rel: stagingRel,
      destRel: rp.rel,
      policy,
      files: new Set(),
      links: new Set(),
      counts: { files: 0, directories: 0, entries: 0 },
    };
    await readTarEntries(chunksOf(body), async (header, content) => {
      if (++staging.counts.entries > options.maxEntries) {
        throw new FileOpError(
          'ARCHIVE_INVALID',
          `the archive holds more than ${options.maxEntries} entries`,
          { field: 'body' },
        );
      }
      await extractEntry(staging, header, content, admission);
    });
    applied = undefined;
    const stagingFd = openSync(fdPath(destFd, stagingName), DIR_FLAGS | NOFOLLOW_FLAGS);
    try {
      await mergeInto(stagingFd, destFd, rp.rel);
    } finally {
      closeSync(stagingFd);
    }
    const { files, directories } = staging.counts;
    return { path: rp.rel, files, directories, bytes: admission.budget.taken };
  } catch (err) {
    throw toFileOpError(err, rp.rel);
  } finally {
    admission.settle(applied);
    if (destFd !== undefined) {
      if (stagingName !== undefined) {
        await rm(fdPath(destFd, stagingName), { recursive: true, force: true }).catch(() => undefined);
      }
      closeSync(destFd);
    }
    // A destination this call made and left empty (a refused archive) goes again.
    if (!rp.stat && applied === 0) removeEmptyDir(rp);
  }
}

/** One entry of the archive, written into the staging directory (the checks come before anything is made). */
async function extractEntry(
  staging: Staging,
  header: Headers,
  content: Readable,
  admission: Admission,
): Promise<void> {
  const name = entryName(header.name);
  if (name === '') {
    content.resume(); // `./`: the destination itself
    return;
  }
  for (let p = parentOf(name); p !== ''; p = parentOf(p)) {
    if (staging.links.has(p) || staging.files.has(p)) {
      throw refused(
        header.name,
        'PATH_SYMLINK_ESCAPE',
        `goes through ${p}, which the archive made a link or a file`,
      );
    }
  }
  const type = header.type ?? 'file';
  switch (type) {
    case 'directory': {
      closeSync(openIn(staging, name, true));
      staging.counts.directories++;
      content.resume();
      return;
    }
    case 'file':
    case 'contiguous-file':
      await writeEntryFile(staging, name, header, chunksOf(nativeOf(content)), admission);
      return;
    case 'symlink': {
      const target = header.linkname ?? '';
      checkLinkTarget(staging, name, target, header.name);
      const dir = openIn(staging, parentOf(name), true);
      try {
        symlinkSync(target, fdPath(dir, path.posix.basename(name)));
        const owner = staging.policy.file.owner;
        if (owner) lchownSync(fdPath(dir, path.posix.basename(name)), owner.uid, owner.gid);
      } finally {
        closeSync(dir);
      }
      staging.links.add(name);
      content.resume();
      return;
    }
    case 'link': {
      // A hard link to a file earlier in this archive, made a copy of it.
      const source = entryName(header.linkname ?? '');
      if (!staging.files.has(source)) {
        throw refused(
          header.name,
          'PATH_HARDLINK',
          `is a hard link to ${header.linkname ?? ''}, not a file earlier in the archive`,
        );
      }
      content.resume();
      const src = openIn(staging, parentOf(source), false);
      let fd: number;
      try {
        fd = openFileInSync(src, path.posix.basename(source), C.O_RDONLY, 'body', source);
      } finally {
        closeSync(src);
      }
      await writeEntryFile(staging, name, header, createReadStream('', { fd, autoClose: true }), admission);
      return;
    }
    // Devices and fifos are refused; headers tar-stream reads itself never reach here (were one to, it is no entry).
    case 'block-device':
    case 'character-device':
    case 'fifo':
    case 'pax-header':
    case 'pax-global-header':
    case 'gnu-long-path':
    case 'gnu-long-link-path':
    default:
      throw new FileOpError(
        'ARCHIVE_INVALID',
        `archive entry ${JSON.stringify(header.name)} is a ${type}; only files, directories and links are extracted`,
        { field: 'body', entry: header.name },
      );
  }
}

async function writeEntryFile(
  staging: Staging,
  name: string,
  header: Headers,
  content: AsyncIterable<Buffer>,
  admission: Admission,
): Promise<void> {
  const dir = openIn(staging, parentOf(name), true);
  let fd: number;
  try {
    fd = openFileInSync(
      dir,
      path.posix.basename(name),
      C.O_WRONLY | C.O_CREAT | C.O_TRUNC,
      'body',
      name,
      0o600,
    );
  } finally {
    closeSync(dir);
  }
  try {
    const exec = (header.mode ?? 0) & 0o111 ? staging.policy.dir.mode & 0o111 : 0;
    applyOwnershipSync(fd, { ...staging.policy.file, mode: staging.policy.file.mode | exec });
    await copyToFd(fd, content, admission.budget, joinRel(staging.destRel, name));
  } finally {
    closeSync(fd);
  }
  if (!staging.files.has(name)) staging.counts.files++;
  staging.files.add(name);
}

/** A directory of the staging area, opened (and made, with `create`) without following any link. */
function openIn(staging: Staging, rel: string, create: boolean): number {
  const full = rel ? `${staging.rel}/${rel}` : staging.rel;
  try {
    return openDirInsideSync(staging.realRoot, full, 'body', create ? staging.policy.dir : undefined);
  } catch (err) {
    if (err instanceof PathRejectedError) throw refused(rel, 'PATH_SYMLINK_ESCAPE', 'goes through a link');
    throw err;
  }
}

/** The entry's name relative to the destination, checked by the path guard's rules; `''` for the destination. */
function entryName(raw: string): string {
  if (raw.startsWith('/')) throw refused(raw, 'PATH_ABSOLUTE', 'is absolute');
  const trimmed = raw.replace(/^(\.\/)+/, '').replace(/\/+$/, '');
  if (trimmed === '' || trimmed === '.') return '';
  if (trimmed.split('/').includes('..')) throw refused(raw, 'PATH_ESCAPE', 'climbs with ..');
  try {
    return resolveInside('/', trimmed, 'entry').rel;
  } catch (err) {
    if (err instanceof PathRejectedError) throw refused(raw, err.code, err.message.replace(/^entry /, ''));
    throw err;
  }
}

/** A symlink's target must stay inside the workspace, read from where the link will be once extracted. */
function checkLinkTarget(staging: Staging, name: string, target: string, raw: string): void {
  if (target === '' || target.includes('\0'))
    throw refused(raw, 'PATH_SYMLINK_DANGLING', 'is a link to nothing');
  if (target.startsWith('/'))
    throw refused(raw, 'PATH_SYMLINK_ESCAPE', `is a link to the absolute path ${target}`);
  const landing = path.posix.normalize(path.posix.join(staging.destRel, parentOf(name), target));
  if (landing === '..' || landing.startsWith('../')) {
    throw refused(raw, 'PATH_SYMLINK_ESCAPE', `is a link to ${target}, outside the workspace`);
  }
}

function refused(
  entry: string,
  code: ConstructorParameters<typeof PathRejectedError>[2],
  why: string,
): PathRejectedError {
  return new PathRejectedError(
    'body',
    entry,
    code,
    `archive entry ${JSON.stringify(entry.slice(0, 200))} ${why}`,
  );
}

/**
 * Moves what the staging directory `from` holds into `to`: a directory missing there is moved whole, one present is
 * merged into; files and links replace what has their name, unless that is a directory. Every step goes through the
 * pinned directories' fds, so a link swapped in meanwhile is never followed.
 */
async function mergeInto(from: number, to: number, rel: string): Promise<void> {
  for (const entry of await readdir(fdPath(from), { withFileTypes: true })) {
    const there = joinRel(rel, entry.name);
    if (entry.isDirectory()) {
      let sub: number;
      try {
        sub = openSync(fdPath(to, entry.name), DIR_FLAGS | NOFOLLOW_FLAGS);
      } catch (err) {
        if (errno(err) === 'ENOENT') {
          await rename(fdPath(from, entry.name), fdPath(to, entry.name));
          continue;
        }
        throw new FileOpError('NOT_A_DIRECTORY', `${there} is in the workspace and is not a directory`, {
          path: there,
        });
      }
      try {
        const inner = openSync(fdPath(from, entry.name), DIR_FLAGS | NOFOLLOW_FLAGS);
        try {
          await mergeInto(inner, sub, there);
        } finally {
          closeSync(inner);
        }
      } finally {
        closeSync(sub);
      }
    } else {
      try {
        await rename(fdPath(from, entry.name), fdPath(to, entry.name));
      } catch (err) {
        if (errno(err) === 'EISDIR' || errno(err) === 'ENOTEMPTY' || errno(err) === 'EEXIST') {
          throw new FileOpError(
            'NOT_A_FILE',
            `${there} is a directory in the workspace; the archive has a file there`,
            {
              path: there,
            },
          );
        }
        throw err;
      }
    }
  }
}

/**
 * An entry's content as a Node stream: tar-stream's own (readable-stream 3) hang when an async iteration of them stops
 * early, which a refusal does. A content cut short (the archive stopped) fails the copy instead of leaving it waiting.
 */
function nativeOf(content: Readable): Readable {
  const pass = new PassThrough({ highWaterMark: 1024 * 1024 });
  pipeline(content, pass, () => undefined);
  return pass;
}

function removeEmptyDir(rp: RealPath): void {
  try {
    rmdirSync(path.join(rp.realRoot, rp.realRel));
  } catch {
    // not empty (made meanwhile by someone else), or already gone
  }
}

function joinRel(base: string, rel: string): string {
  return base ? (rel ? `${base}/${rel}` : base) : rel;
}
