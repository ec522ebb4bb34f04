import * as fs from 'node:fs/promises';
import * as os from 'node:os';
import * as path from 'node:path';
import type { FileOp, FileOpOutcome } from '../file-op.types';
import { FileOperations } from '../file-operations.service';
import { FileOpError, PathRejectedError } from '../workspace.errors';
import { resolveWorkspaceOptions, type WorkspaceModuleOptions } from '../workspace.options';

/**
 * A fresh temp dir per test for the file API's specs: `ws`, the workspace the ops run in, and beside it
 * `outside/secret.txt` ("TOP SECRET\n"), which no op may ever reach. Ops go through `FileOperations.execute`,
 * the entry every caller uses, so errors come out exactly as callers see them.
 */
export interface FileOpsFixture {
  readonly tmp: string;
  readonly ws: string;
  readonly outside: string;
  /** Replaces the file API with one built from these options (root: `tmp`). */
  configure(overrides?: Partial<WorkspaceModuleOptions>): void;
  run(op: FileOp): Promise<FileOpOutcome>;
  /** Writes a file into the workspace behind the API's back, parents made. */
  put(rel: string, content: string | Buffer): Promise<void>;
  get(rel: string): Promise<string>;
}

/** Registers the fixture's `beforeEach`/`afterEach` in the calling `describe`. */
export function useFileOpsFixture(): FileOpsFixture {
  let tmp = '';
  let ops: FileOperations | undefined;
  const f: FileOpsFixture = {
    get tmp() {
      return tmp;
    },
    get ws() {
      return path.join(tmp, 'ws');
    },
    get outside() {
      return path.join(tmp, 'outside');
    },
    configure(overrides = {}) {
      ops = new FileOperations(resolveWorkspaceOptions({ root: tmp, ...overrides }));
    },
    run(op) {
      if (!ops) throw new Error('the fixture is set up in beforeEach');
      return ops.execute(f.ws, op);
    },
    async put(rel, content) {
      await fs.mkdir(path.dirname(path.join(f.ws, rel)), { recursive: true });
      await fs.writeFile(path.join(f.ws, rel), content);
    },
    get(rel) {
      return fs.readFile(path.join(f.ws, rel), 'utf8');
    },
  };
  beforeEach(async () => {
    tmp = await fs.mkdtemp(path.join(os.tmpdir(), 'sy-fileops-'));
    await fs.mkdir(f.ws);
    await fs.mkdir(f.outside);
    await fs.writeFile(path.join(f.outside, 'secret.txt'), 'TOP SECRET\n');
    f.configure();
  });
  afterEach(async () => {
    await fs.rm(tmp, { recursive: true, force: true });
  });
  return f;
}

/** Resolves to the error the promise rejected with, failing the test if it resolved. */
export async function failure(p: Promise<unknown>) {
  try {
    await p;
  } catch (err) {
    return err as Error & { code: string; details: Record<string, unknown> };
  }
  throw new Error('expected a rejection');
}

export async function expectFileOpError(p: Promise<unknown>, code: string): Promise<FileOpError> {
  const err = await failure(p);
  expect(err).toBeInstanceOf(FileOpError);
  expect(err.code).toBe(code);
  return err as FileOpError;
}

export async function expectRejected(p: Promise<unknown>, code: string): Promise<PathRejectedError> {
  const err = await failure(p);
  expect(err).toBeInstanceOf(PathRejectedError);
  expect(err.code).toBe(code);
  return err as PathRejectedError;
}
