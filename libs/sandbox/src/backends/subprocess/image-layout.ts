import * as fs from 'node:fs';
import * as path from 'node:path';
import { SYSTEM_PATHS, type SystemLayout } from './bwrap-command';

/** Reads an image root's entries without following symlinks (a link in the image points into the image). */
export interface RootReader {
  lstat(p: string): fs.Stats | undefined;
  readlink(p: string): string;
  readdir(p: string): string[];
}

const fsReader: RootReader = {
  lstat: (p) => fs.lstatSync(p, { throwIfNoEntry: false }),
  readlink: (p) => fs.readlinkSync(p),
  readdir: (p) => fs.readdirSync(p),
};

/**
 * Package managers' records of what the image installed (dpkg's database, alternatives): read-only, as the rest of
 * /var is not shown (the container tiers' /var/tmp is the sandbox's /tmp here).
 */
const IMAGE_STATE = ['/var/lib'];

/** The image's /opt entry the engine binds its own directories under (runner, `python` link): not the image's. */
const ENGINE_OPT = 'switchyard';

/**
 * The system of an image's exported root, read-only: `/usr`, `/bin`, `/sbin`, `/lib*` as the image has them (links
 * stay links, resolved inside the sandbox), `/var/lib`, its whole `/etc` (certificates, the loader's cache, python's and node's
 * configuration; the synthetic passwd, group and hosts are bound over it) and what it installed under `/opt`. Nothing
 * of the host's system is shown. Every bind source is an entry of `root` that is not a link: a link is recreated as
 * a link, so an absolute one can never resolve against the host.
 */
export function imageSystemLayout(root: string, reader: RootReader = fsReader): SystemLayout {
  const args: string[] = [];
  const boundDirs: string[] = [];
  const mirror = (p: string, into: string[]) => {
    const st = reader.lstat(path.join(root, p));
    if (!st) return;
    if (st.isSymbolicLink()) into.push('--symlink', reader.readlink(path.join(root, p)), p);
    else if (st.isDirectory() || st.isFile()) {
      into.push('--ro-bind', path.join(root, p), p);
      if (st.isDirectory()) boundDirs.push(p);
    }
  };
  for (const p of [...SYSTEM_PATHS, ...IMAGE_STATE]) mirror(p, args);
  const opt = reader.lstat(path.join(root, 'opt'));
  if (opt?.isDirectory()) {
    for (const name of reader.readdir(path.join(root, 'opt')).sort()) {
      if (name !== ENGINE_OPT) mirror(`/opt/${name}`, args);
    }
  }
  const etcArgs: string[] = [];
  mirror('/etc', etcArgs);
  return { args, etcArgs, boundDirs };
}

/** A path inside an image root: where it leads once every link is followed within the root, or why not. */
export interface RootPath {
  /** The resolved path as the sandbox sees it. */
  path?: string;
  problem?: string;
}

const MAX_LINKS = 40;

/**
 * Resolves `p` as the sandbox will: every link (absolute ones from the root, relative ones from their directory)
 * followed inside `root`, never on the host. The target must be an executable file.
 */
export function resolveInRoot(
  root: string,
  p: string,
  reader: Pick<RootReader, 'lstat' | 'readlink'> = fsReader,
): RootPath {
  let rest = p.split('/').filter(Boolean);
  let done: string[] = [];
  let links = 0;
  while (rest.length > 0) {
    const part = rest.shift()!;
    if (part === '.') continue;
    if (part === '..') {
      done.pop();
      continue;
    }
    const inside = `/${[...done, part].join('/')}`;
    const st = reader.lstat(path.join(root, inside));
    if (!st) return { problem: `${p}: not in the image (${inside} is missing)` };
    if (st.isSymbolicLink()) {
      if (++links > MAX_LINKS) return { problem: `${p}: too many levels of links` };
      const target = reader.readlink(path.join(root, inside));
      if (target.startsWith('/')) done = [];
      rest = [...target.split('/').filter(Boolean), ...rest];
      continue;
    }
    if (rest.length > 0 && !st.isDirectory()) return { problem: `${p}: ${inside} is not a directory` };
    done.push(part);
  }
  const resolved = `/${done.join('/')}`;
  const st = reader.lstat(path.join(root, resolved));
  // Any execute bit will do: the owner the sandbox sees depends on who extracted the root.
  if (!st?.isFile() || (st.mode & 0o111) === 0)
    return { problem: `${p}: ${resolved} is not an executable file` };
  return { path: resolved };
}
