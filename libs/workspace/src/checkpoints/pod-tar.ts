import { extract, type Headers } from 'tar-stream';
import { CheckpointError, formatBytes } from '../workspace.errors';

/** Directories nested deeper than this are refused, as the tree tool refuses them (ELOOP). */
export const MAX_DEPTH = 256;
/**
 * What a tar may take beyond its files' data: headers, padding, long-name and pax records, end blocks (the
 * Kubernetes backend's own bound on a `tarOut` is the same).
 */
export const TAR_HEADROOM_BYTES = 64 * 1024 * 1024;

export type TarNodeType = 'file' | 'dir' | 'symlink';

/** An entry of a tar as the workspace it unpacks to would hold it. */
export interface TarNode {
  type: TarNodeType;
  /** Permission bits (`07777`). */
  mode: number;
  /** Regular files: their size (0 for the rest). */
  size: number;
  /** Regular files, when asked for (`keepData`): their contents, a view of the tar. */
  data?: Buffer;
  /** Links: where they point. */
  target?: string;
}

/** A tar's entries, read in memory: what its workspace holds, by path. */
export interface TarTree {
  /** Every entry but the workspace's root, by path (`dir/file`), directories the tar implies included. */
  nodes: Map<string, TarNode>;
  /** The names in each directory (`''`: the root), unsorted. */
  children: Map<string, string[]>;
  /** As the tree tool counts a tree: entries that are not directories, directories, bytes of regular files. */
  files: number;
  directories: number;
  bytes: number;
  /** Bytes of data the tar holds (a hard-linked file's once): what unpacking it writes. */
  dataBytes: number;
  /** Entries left out: devices, fifos and types the engine does not know. */
  ignored: number;
}

export interface ReadTarOptions {
  /** Bytes of data its entries may hold in all (the workspace cap); the tar itself, that plus `TAR_HEADROOM_BYTES`. */
  maxBytes: number;
  /** Keep regular files' contents (to compare them); counting needs none. */
  keepData: boolean;
  /** Whose tar it is, for messages: `the workspace of session ses_a`. */
  source: string;
}

interface PaxHeaders extends Headers {
  pax?: Record<string, string>;
}

/**
 * Reads a tar in memory (tar-stream; nothing is ever written to disk) and checks it is one a workspace may hold:
 * at most `maxBytes` of data, no absolute path, no `..`, no path twice, no entry under a link or a file, hard links
 * only to an earlier file or link of the tar, directories nested at most `MAX_DEPTH` deep. Devices, fifos and
 * entries of unknown types are ignored (not counted, not compared; the tar is not rewritten). Names are decoded as
 * Python decodes file names (UTF-8, a byte that is not part of one as U+DC80-U+DCFF), so paths read as the tree
 * tool reads them on disk. Refusals are `CheckpointError`s: `CHECKPOINT_SPACE` for size, `CHECKPOINT_FAILED` for the
 * rest.
 */
export async function readTar(tar: Buffer, options: ReadTarOptions): Promise<TarTree> {
  const { maxBytes, source } = options;
  if (tar.length > maxBytes + TAR_HEADROOM_BYTES)
    throw tooLarge(source, tar.length, maxBytes + TAR_HEADROOM_BYTES);
  const reader = new TarReader(options);
  await new Promise<void>((resolve, reject) => {
    const parser = extract({ filenameEncoding: 'latin1' });
    let failed = false;
    const fail = (err: unknown) => {
      if (failed) return;
      failed = true;
      parser.destroy();
      reject(
        err instanceof CheckpointError
          ? err
          : new CheckpointError(
              'CHECKPOINT_FAILED',
              `${source} is not a readable tar: ${(err as Error).message}`,
              {},
              { cause: err },
            ),
      );
    };
    parser.on('entry', (header: PaxHeaders, stream: NodeJS.ReadableStream, next: () => void) => {
      const chunks: Buffer[] = [];
      let length = 0;
      const keep = options.keepData && isFile(header.type);
      stream.on('data', (chunk: Buffer) => {
        if (failed) return;
        length += chunk.length;
        if (keep) chunks.push(chunk);
        if (reader.dataBytes + length > maxBytes) fail(tooMuchData(source, maxBytes));
      });
      stream.on('error', fail);
      stream.on('end', () => {
        if (failed) return;
        try {
          // One chunk when the tar was written whole (a view of it, no copy).
          const data = !keep ? undefined : chunks.length === 1 ? chunks[0] : Buffer.concat(chunks, length);
          reader.add(header, length, data);
        } catch (err) {
          fail(err);
          return;
        }
        next();
      });
    });
    parser.on('error', fail);
    parser.on('finish', () => {
      if (!failed) resolve();
    });
    parser.end(tar);
  });
  return reader.finish();
}

const isFile = (type: Headers['type']): boolean => type === 'file' || type === 'contiguous-file';

class TarReader {
  dataBytes = 0;
  private readonly nodes = new Map<string, TarNode>();
  private readonly skipped = new Set<string>();
  private root = false;

  constructor(private readonly options: ReadTarOptions) {}

  add(header: PaxHeaders, length: number, data: Buffer | undefined): void {
    this.dataBytes += length;
    const pax = header.pax ?? {};
    const name = pax.path ? pax.path : fsName(header.name);
    const type = header.type;
    const kind = isFile(type) ? 'file' : type === 'directory' ? 'dir' : type === 'symlink' ? 'symlink' : null;
    const p = this.path(name, kind === 'dir');
    if (this.nodes.has(p) || this.skipped.has(p) || (p === '' && this.root))
      this.refuse(name, 'it is in the tar twice');
    if (p === '') {
      if (kind !== 'dir') this.refuse(name, 'the root is not a directory');
      this.root = true;
      return;
    }
    const mode = (header.mode ?? 0) & 0o7777;
    const linkname = pax.linkpath ? pax.linkpath : fsName(header.linkname ?? '');
    if (type === 'link') {
      const to = this.path(linkname, false);
      const target = this.nodes.get(to);
      if (this.skipped.has(to)) this.skipped.add(p);
      else if (target && target.type !== 'dir') this.nodes.set(p, { ...target });
      else this.refuse(name, `a hard link to ${JSON.stringify(linkname)}, which is not a file before it`);
    } else if (kind === 'file')
      this.nodes.set(p, { type: 'file', mode, size: length, ...(data && { data }) });
    else if (kind === 'dir') this.nodes.set(p, { type: 'dir', mode, size: 0 });
    else if (kind === 'symlink') this.nodes.set(p, { type: 'symlink', mode, size: 0, target: linkname });
    else this.skipped.add(p); // devices, fifos, unknown types: not data a checkpoint keeps
  }

  finish(): TarTree {
    const tree: TarTree = {
      nodes: this.nodes,
      children: new Map([['', []]]),
      files: 0,
      directories: 0,
      bytes: 0,
      dataBytes: this.dataBytes,
      ignored: this.skipped.size,
    };
    // Every entry's parents must be directories: tar would otherwise write through a link, or fail.
    for (const p of [...this.nodes.keys()]) {
      for (let i = p.indexOf('/'); i !== -1; i = p.indexOf('/', i + 1)) {
        const up = p.slice(0, i);
        const parent = this.nodes.get(up);
        if (parent?.type === 'dir') continue;
        if (parent || this.skipped.has(up)) this.refuse(p, `${up} is not a directory`);
        this.nodes.set(up, { type: 'dir', mode: 0o755, size: 0 }); // implied: tar makes it
      }
    }
    for (const [p, node] of this.nodes) {
      const i = p.lastIndexOf('/');
      const parent = i === -1 ? '' : p.slice(0, i);
      const siblings = tree.children.get(parent);
      if (siblings) siblings.push(p.slice(i + 1));
      else tree.children.set(parent, [p.slice(i + 1)]);
      if (node.type === 'dir') tree.directories++;
      else tree.files++;
      tree.bytes += node.size;
    }
    return tree;
  }

  /** The entry's path in the workspace (`''`: the root), or a refusal. */
  private path(name: string, dir: boolean): string {
    if (name === '') this.refuse(name, 'an empty name');
    if (name.startsWith('/')) this.refuse(name, 'an absolute path');
    if (name.includes('\0')) this.refuse(name, 'a NUL in its name');
    const parts = name.split('/').filter((s) => s !== '' && s !== '.');
    if (parts.includes('..')) this.refuse(name, 'a path out of the workspace (..)');
    if (parts.length > MAX_DEPTH + (dir ? 0 : 1)) this.refuse(name, 'directories nested too deep');
    return parts.join('/');
  }

  private refuse(name: string, why: string): never {
    const shown = name.length > 200 ? `${name.slice(0, 200)}…` : name;
    throw new CheckpointError(
      'CHECKPOINT_FAILED',
      `${this.options.source} holds an entry the engine refuses (${JSON.stringify(shown)}: ${why})`,
      { path: shown },
    );
  }
}

function tooLarge(source: string, bytes: number, limit: number): CheckpointError {
  return new CheckpointError(
    'CHECKPOINT_SPACE',
    `${source} is a tar of ${formatBytes(bytes)}, more than the ${formatBytes(limit)} a workspace's may be ` +
      `(the workspace cap and tar headers)`,
    { bytes, limit },
  );
}

function tooMuchData(source: string, limit: number): CheckpointError {
  return new CheckpointError(
    'CHECKPOINT_SPACE',
    `${source} holds more than ${formatBytes(limit)} of data, the workspace cap`,
    { limit },
  );
}

/**
 * A name read as the tar's bytes (latin1) decoded as Python decodes file names (`surrogateescape`): UTF-8, and each
 * byte that is not part of a valid sequence as U+DC80-U+DCFF. Pax names are UTF-8 already (tar-stream decodes them).
 */
export function fsName(latin1: string): string {
  // eslint-disable-next-line no-control-regex
  if (/^[\x00-\x7f]*$/.test(latin1)) return latin1;
  const bytes = Buffer.from(latin1, 'latin1');
  let out = '';
  let i = 0;
  while (i < bytes.length) {
    const n = sequenceLength(bytes, i);
    if (n === 0) out += String.fromCharCode(0xdc00 + bytes[i++]);
    else {
      out += bytes.toString('utf8', i, i + n);
      i += n;
    }
  }
  return out;
}

/** The length of the valid UTF-8 sequence at `i` (RFC 3629: no overlongs, surrogates or past U+10FFFF), or 0. */
function sequenceLength(b: Buffer, i: number): number {
  const c = b[i];
  if (c < 0x80) return 1;
  const cont = (k: number, lo = 0x80, hi = 0xbf) => i + k < b.length && b[i + k] >= lo && b[i + k] <= hi;
  if (c >= 0xc2 && c <= 0xdf) return cont(1) ? 2 : 0;
  if (c === 0xe0) return cont(1, 0xa0) && cont(2) ? 3 : 0;
  if ((c >= 0xe1 && c <= 0xec) || c === 0xee || c === 0xef) return cont(1) && cont(2) ? 3 : 0;
  if (c === 0xed) return cont(1, 0x80, 0x9f) && cont(2) ? 3 : 0;
  if (c === 0xf0) return cont(1, 0x90) && cont(2) && cont(3) ? 4 : 0;
  if (c >= 0xf1 && c <= 0xf3) return cont(1) && cont(2) && cont(3) ? 4 : 0;
  if (c === 0xf4) return cont(1, 0x80, 0x8f) && cont(2) && cont(3) ? 4 : 0;
  return 0;
}
