import * as fs from 'node:fs/promises';
import * as path from 'node:path';
import type { FileOp, WorkspaceLimits } from '../file-op.types';
import { reviveError, type FileToolOptions, type WorkspaceToolAnswer } from './workspace-tool.protocol';

/**
 * @internal Tests only: the table of file ops the pod's workspace tool must answer exactly as the host backend does
 * (workspace-tool.spec.ts runs it with the host's node, workspace-tool.image.spec.ts in the sandbox image), the tree
 * it starts from and how answers are compared.
 */

export const LIMITS: WorkspaceLimits = {
  maxFileBytes: 4096,
  maxWorkspaceBytes: 1024 * 1024,
  maxPathLength: 256,
};
const FIXED_TIME = new Date('2024-05-06T07:08:09.000Z');

/** Everything a caller (the HTTP filter, the action handlers) can observe of an error. */
export function describeError(err: unknown) {
  const e = err as Error & Record<string, unknown>;
  return {
    class: e.constructor.name,
    name: e.name,
    code: e.code,
    message: e.message,
    details: e.details,
    kind: e.kind,
    errorClass: e.errorClass,
    field: e.field,
    retriable: e.retriable,
  };
}

export type Result = { ok: true; value: unknown } | { ok: false; error: ReturnType<typeof describeError> };

/** A host call's result or error, in a shape `toEqual` compares. */
export async function settle(p: Promise<unknown>): Promise<Result> {
  try {
    return { ok: true, value: await p };
  } catch (err) {
    return { ok: false, error: describeError(err) };
  }
}

/** The tool's answer in the same shape as `settle` of the host call, its error revived as the engine will. */
export function fromAnswer(
  answer: WorkspaceToolAnswer,
  pick: (a: Record<string, unknown>) => unknown,
): Result {
  if (!answer.ok) return { ok: false, error: describeError(reviveError(answer)) };
  return { ok: true, value: pick(answer) };
}

/** The op of a row, given what the host answered to the row before it. */
export function opOf(row: Row, previous: Result): FileOp {
  return typeof row.op === 'function' ? row.op(previous) : row.op;
}

/**
 * The tree every comparison starts from, in `<tmp>/<name>/ws`, with `<tmp>/<name>/outside/secret.txt` next to it
 * (the target of the `esc` symlink and the `hard` hardlink). Trees compared by `list` must have names of the same
 * length: a symlink's size is its target's length.
 */
export async function seed(tmp: string, name: string): Promise<string> {
  const base = path.join(tmp, name);
  const ws = path.join(base, 'ws');
  await fs.rm(base, { recursive: true, force: true });
  await fs.mkdir(path.join(base, 'outside'), { recursive: true });
  await fs.writeFile(path.join(base, 'outside', 'secret.txt'), 'TOP SECRET\n');
  const files: [string, string | Buffer][] = [
    ['a.txt', 'hello world\nsecond line\nhello again\n'],
    ['bin.dat', Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x00, 0x01, 0xff, 0xfe])],
    ['big.txt', 'x'.repeat(100) + '\n' + 'y'.repeat(5000) + '\n'],
    ['sub/c.txt', 'nested Hello\n'],
    ['sub/deeper/d.py', 'print("hello")\n'],
    ['src/main.py', 'def main():\n    return 42\n'],
    ['redos.txt', 'a'.repeat(40) + '!\n'],
    ['tree/x/y.txt', 'y\n'],
  ];
  for (const [rel, content] of files) {
    await fs.mkdir(path.dirname(path.join(ws, rel)), { recursive: true });
    await fs.writeFile(path.join(ws, rel), content);
  }
  await fs.symlink(path.join(base, 'outside', 'secret.txt'), path.join(ws, 'esc'));
  await fs.symlink('sub/c.txt', path.join(ws, 'inlink'));
  await fs.link(path.join(base, 'outside', 'secret.txt'), path.join(ws, 'hard'));
  for (const rel of ['sub/c.txt', 'sub', 'src/main.py']) {
    await fs.utimes(path.join(ws, rel), FIXED_TIME, FIXED_TIME);
  }
  return ws;
}

/** Names, types, link targets, sizes, modes and contents: what must end up identical. */
export async function treeOf(tmp: string, ws: string): Promise<Record<string, string>> {
  const out: Record<string, string> = {};
  const visit = async (rel: string) => {
    for (const name of (await fs.readdir(path.join(ws, rel))).sort()) {
      const r = rel ? `${rel}/${name}` : name;
      const abs = path.join(ws, r);
      const st = await fs.lstat(abs);
      const mode = (st.mode & 0o7777).toString(8);
      if (st.isSymbolicLink()) {
        const target = await fs.readlink(abs);
        out[r] = `link ${target.startsWith(tmp) ? path.relative(path.dirname(ws), target) : target}`;
      } else if (st.isDirectory()) {
        out[r] = `dir ${mode}`;
        await visit(r);
      } else {
        out[r] = `file ${mode} ${st.nlink} ${(await fs.readFile(abs)).toString('base64')}`;
      }
    }
  };
  await visit('');
  return out;
}

export interface Row {
  name: string;
  op: FileOp | ((previous: Result) => FileOp);
  limits?: Partial<WorkspaceLimits>;
  options?: FileToolOptions;
  /** `ok` or the error code the host backend must answer: keeps the table honest about what it covers. */
  expect: string;
}

/** Run in order, each on both trees: later rows see what earlier ones did. */
export const ROWS: Row[] = [
  // read
  { name: 'read a text file', op: { op: 'read', path: 'a.txt' }, expect: 'ok' },
  { name: 'read a line window', op: { op: 'read', path: 'a.txt', offset: 2, limit: 1 }, expect: 'ok' },
  { name: 'read a binary file as base64', op: { op: 'read', path: 'bin.dat' }, expect: 'ok' },
  { name: 'read through an inside symlink', op: { op: 'read', path: 'inlink' }, expect: 'ok' },
  { name: 'read over maxFileBytes', op: { op: 'read', path: 'big.txt' }, expect: 'FILE_TOO_LARGE' },
  {
    name: 'read a window of a file over the cap',
    op: { op: 'read', path: 'big.txt', offset: 1, limit: 1 },
    expect: 'ok',
  },
  { name: 'read ../x', op: { op: 'read', path: '../x' }, expect: 'PATH_ESCAPE' },
  { name: 'read a/../../x', op: { op: 'read', path: 'sub/../../x' }, expect: 'PATH_ESCAPE' },
  { name: 'read an absolute path', op: { op: 'read', path: '/etc/passwd' }, expect: 'PATH_ABSOLUTE' },
  {
    name: 'read encoded traversal',
    op: { op: 'read', path: '%2e%2e/x' },
    expect: 'PATH_ENCODED_TRAVERSAL',
  },
  { name: 'read a symlink out', op: { op: 'read', path: 'esc' }, expect: 'PATH_SYMLINK_ESCAPE' },
  { name: 'read a hardlink', op: { op: 'read', path: 'hard' }, expect: 'PATH_HARDLINK' },
  { name: 'read a missing file', op: { op: 'read', path: 'nope.txt' }, expect: 'ENOENT' },
  { name: 'read a directory', op: { op: 'read', path: 'sub' }, expect: 'EISDIR' },
  { name: 'read the root', op: { op: 'read', path: '.' }, expect: 'PATH_IS_ROOT' },
  { name: 'read an empty path', op: { op: 'read', path: '' }, expect: 'PATH_EMPTY' },
  { name: 'read a control char', op: { op: 'read', path: 'a\nb' }, expect: 'PATH_CONTROL_CHAR' },
  { name: 'read a bidi override', op: { op: 'read', path: 'txt\u202eexe' }, expect: 'PATH_INVISIBLE_CHAR' },
  { name: 'read a backslash', op: { op: 'read', path: '..\\x' }, expect: 'PATH_BACKSLASH' },
  { name: 'read a too long path', op: { op: 'read', path: 'p/'.repeat(200) }, expect: 'PATH_TOO_LONG' },
  { name: 'read a bad offset', op: { op: 'read', path: 'a.txt', offset: 0 }, expect: 'INVALID_INPUT' },
  // write
  {
    name: 'write a new file, parents made',
    op: { op: 'write', path: 'new/deep/file.txt', content: 'fresh\n' },
    expect: 'ok',
  },
  { name: 'append', op: { op: 'write', path: 'a.txt', content: 'tail\n', mode: 'append' }, expect: 'ok' },
  {
    name: 'create over a file',
    op: { op: 'write', path: 'a.txt', content: 'x', mode: 'create' },
    expect: 'EEXIST',
  },
  { name: 'overwrite', op: { op: 'write', path: 'sub/deeper/d.py', content: 'print(1)\n' }, expect: 'ok' },
  {
    name: 'write over maxFileBytes',
    op: { op: 'write', path: 'huge.txt', content: 'z'.repeat(LIMITS.maxFileBytes + 1) },
    expect: 'FILE_TOO_LARGE',
  },
  {
    name: 'write over maxWorkspaceBytes',
    op: { op: 'write', path: 'more.txt', content: 'm'.repeat(1000) },
    limits: { maxWorkspaceBytes: 6000 },
    expect: 'WORKSPACE_FULL',
  },
  {
    name: 'write through a symlink out',
    op: { op: 'write', path: 'esc', content: 'pwned' },
    expect: 'PATH_SYMLINK_ESCAPE',
  },
  {
    name: 'write a hardlink',
    op: { op: 'write', path: 'hard', content: 'pwned' },
    expect: 'PATH_HARDLINK',
  },
  { name: 'write a directory', op: { op: 'write', path: 'sub', content: 'x' }, expect: 'EISDIR' },
  { name: 'write under a file', op: { op: 'write', path: 'a.txt/x', content: 'x' }, expect: 'ENOTDIR' },
  { name: 'write ../x', op: { op: 'write', path: '../x', content: 'x' }, expect: 'PATH_ESCAPE' },
  {
    name: 'write without content',
    op: { op: 'write', path: 'x.txt' } as unknown as FileOp,
    expect: 'INVALID_INPUT',
  },
  // edit
  { name: 'edit', op: { op: 'edit', path: 'a.txt', find: 'second', replace: '2nd' }, expect: 'ok' },
  {
    name: 'edit all',
    op: { op: 'edit', path: 'a.txt', find: 'hello', replace: 'HI', all: true },
    expect: 'ok',
  },
  {
    name: 'edit with no match',
    op: { op: 'edit', path: 'a.txt', find: 'absent', replace: 'x' },
    expect: 'EDIT_NOT_FOUND',
  },
  {
    name: 'edit ambiguous',
    op: { op: 'edit', path: 'a.txt', find: 'HI', replace: 'x' },
    expect: 'EDIT_AMBIGUOUS',
  },
  {
    name: 'edit a binary file',
    op: { op: 'edit', path: 'bin.dat', find: 'P', replace: 'Q' },
    expect: 'NOT_REGULAR_FILE',
  },
  {
    name: 'edit a symlink out',
    op: { op: 'edit', path: 'esc', find: 'TOP', replace: 'x' },
    expect: 'PATH_SYMLINK_ESCAPE',
  },
  // list
  { name: 'list the root', op: { op: 'list' }, expect: 'ok' },
  { name: 'list recursive, first page', op: { op: 'list', recursive: true, limit: 4 }, expect: 'ok' },
  {
    name: 'list recursive, next page by cursor',
    op: (prev) => ({
      op: 'list',
      recursive: true,
      limit: 4,
      cursor: (prev as { value: { output: { nextCursor: string } } }).value.output.nextCursor,
    }),
    expect: 'ok',
  },
  { name: 'list a subdirectory', op: { op: 'list', path: 'sub', recursive: true }, expect: 'ok' },
  {
    name: 'list with a forged cursor',
    op: { op: 'list', cursor: 'not-a-cursor!' },
    expect: 'INVALID_CURSOR',
  },
  { name: 'list a file', op: { op: 'list', path: 'a.txt' }, expect: 'ENOTDIR' },
  { name: 'list a missing dir', op: { op: 'list', path: 'nope' }, expect: 'ENOENT' },
  { name: 'list a symlink out', op: { op: 'list', path: 'esc' }, expect: 'PATH_SYMLINK_ESCAPE' },
  {
    name: 'list past the scan cap',
    op: { op: 'list', recursive: true },
    options: { maxScanEntries: 5 },
    expect: 'ok',
  },
  // find
  { name: 'find **/*.py', op: { op: 'find', pattern: '**/*.py' }, expect: 'ok' },
  {
    name: 'find in a subdirectory, limited',
    op: { op: 'find', pattern: '**', path: 'sub', limit: 2 },
    expect: 'ok',
  },
  { name: 'find with a bad glob', op: { op: 'find', pattern: '' }, expect: 'INVALID_PATTERN' },
  // grep
  { name: 'grep', op: { op: 'grep', pattern: 'hello|HI' }, expect: 'ok' },
  {
    name: 'grep ignoring case, in *.py',
    op: { op: 'grep', pattern: 'HELLO', ignoreCase: true, glob: '*.py' },
    expect: 'ok',
  },
  { name: 'grep one file', op: { op: 'grep', pattern: 'return', path: 'src/main.py' }, expect: 'ok' },
  { name: 'grep with a limit', op: { op: 'grep', pattern: '.', limit: 2 }, expect: 'ok' },
  { name: 'grep with a bad regex', op: { op: 'grep', pattern: '(' }, expect: 'INVALID_PATTERN' },
  {
    name: 'grep with a pattern over maxRegexLength',
    op: { op: 'grep', pattern: 'abcdef' },
    options: { maxRegexLength: 5 },
    expect: 'INVALID_PATTERN',
  },
  {
    name: 'grep with catastrophic backtracking',
    op: { op: 'grep', pattern: '^(a+)+$', path: 'redos.txt' },
    options: { grepFileTimeoutMs: 50 },
    expect: 'INVALID_PATTERN',
  },
  // stat
  { name: 'stat a file', op: { op: 'stat', path: 'sub/c.txt' }, expect: 'ok' },
  { name: 'stat a directory', op: { op: 'stat', path: 'sub' }, expect: 'ok' },
  { name: 'stat a missing entry', op: { op: 'stat', path: 'nope' }, expect: 'ENOENT' },
  // mkdir
  { name: 'mkdir -p', op: { op: 'mkdir', path: 'made/here' }, expect: 'ok' },
  { name: 'mkdir again', op: { op: 'mkdir', path: 'made/here' }, expect: 'ok' },
  { name: 'mkdir over a file', op: { op: 'mkdir', path: 'a.txt' }, expect: 'EEXIST' },
  {
    name: 'mkdir through a symlink out',
    op: { op: 'mkdir', path: 'esc/x' },
    expect: 'PATH_SYMLINK_ESCAPE',
  },
  // move
  { name: 'move a file', op: { op: 'move', path: 'new/deep/file.txt', to: 'moved.txt' }, expect: 'ok' },
  { name: 'move onto a file', op: { op: 'move', path: 'moved.txt', to: 'a.txt' }, expect: 'EEXIST' },
  {
    name: 'move with overwrite',
    op: { op: 'move', path: 'moved.txt', to: 'src/main.py', overwrite: true },
    expect: 'ok',
  },
  {
    name: 'move a directory into itself',
    op: { op: 'move', path: 'tree', to: 'tree/x/in' },
    expect: 'INVALID_MOVE',
  },
  {
    name: 'move out of the workspace',
    op: { op: 'move', path: 'a.txt', to: '../a.txt' },
    expect: 'PATH_ESCAPE',
  },
  { name: 'move a missing entry', op: { op: 'move', path: 'nope', to: 'x' }, expect: 'ENOENT' },
  // delete
  { name: 'delete a non-empty directory', op: { op: 'delete', path: 'tree' }, expect: 'ENOTEMPTY' },
  {
    name: 'delete a directory recursively',
    op: { op: 'delete', path: 'tree', recursive: true },
    expect: 'ok',
  },
  { name: 'delete a link (not its target)', op: { op: 'delete', path: 'esc' }, expect: 'ok' },
  { name: 'delete the root', op: { op: 'delete', path: '.', recursive: true }, expect: 'PATH_IS_ROOT' },
  { name: 'delete a missing file', op: { op: 'delete', path: 'nope' }, expect: 'ENOENT' },
  // not an op
  {
    name: 'an unknown op',
    op: { op: 'chmod', path: 'a.txt' } as unknown as FileOp,
    expect: 'INVALID_INPUT',
  },
];
