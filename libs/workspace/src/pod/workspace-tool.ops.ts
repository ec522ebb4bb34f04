import { closeSync, constants as C } from 'node:fs';
import { SESSION_HOME_NAME } from '@switchyard/common';
import * as path from 'node:path';
import { writeFileAtomic } from '../atomic-write';
import { newEntryPolicy } from '../entry-policy';
import { FileOperations } from '../file-operations.service';
import { assertPlainFd, openDirInsideSync, openFileInSync } from '../fd-opens';
import { toFileOpError } from '../fs-errors';
import { realPathInside, realRootOf } from '../path-guard';
import { readFdUpTo } from '../file-content';
import { diskUsage, walk, type WalkState } from '../workspace-fs';
import { FileOpError } from '../workspace.errors';
import { DEFAULT_WORKSPACE_LIMITS, resolveWorkspaceOptions } from '../workspace.options';
import type { WorkspaceLimits } from '../file-op.types';
import {
  type FileToolOptions,
  type FileToolRequest,
  type ReadBytesToolRequest,
  serializeError,
  type SnapshotToolRequest,
  type UsageToolRequest,
  WORKSPACE_TOOL_OPS,
  WORKSPACE_TOOL_ROOT,
  type WorkspaceToolAnswer,
  WorkspaceToolError,
  type WorkspaceToolRequest,
  type WorkspaceToolResults,
  type WriteBytesToolRequest,
} from './workspace-tool.protocol';

/**
 * What the pod's workspace tool does with one request: the host backend's own code run against `root`. Kept apart
 * from the entry (`workspace-tool.ts`, which only moves JSON) so that it can be tested in-process too.
 *
 * Each run is a fresh process, so nothing is cached between requests: the file API's usage count starts stale
 * every time, and a write re-measures the workspace with the bounded walk the host does after a code action.
 */

/** Defaults of `WorkspaceOptions` (workspace.options.ts) the requests may leave out. */
const DEFAULT_SCAN_ENTRIES = 100_000;
const DEFAULT_SNAPSHOT_ENTRIES = 10_000;

export async function handleRequest(input: unknown): Promise<WorkspaceToolAnswer> {
  try {
    const req = checkRequest(input);
    const root = req.root ?? WORKSPACE_TOOL_ROOT;
    switch (req.op) {
      case 'file':
        return { ok: true, ...(await fileOp(root, req)) };
      case 'snapshot':
        return { ok: true, ...(await snapshot(root, req)) };
      case 'readBytes':
        return { ok: true, ...(await readBytes(root, req)) };
      case 'writeBytes':
        return { ok: true, ...(await writeBytes(root, req)) };
      case 'usage':
        return { ok: true, ...(await usage(root, req)) };
    }
  } catch (err) {
    return { ok: false, error: serializeError(err) };
  }
}

// ------------------------------------------------------------------ ops

async function fileOp(root: string, req: FileToolRequest): Promise<WorkspaceToolResults['file']> {
  if (!isRecord(req.request)) throw bad('request must be a file op object');
  if (!isRecord(req.limits)) throw bad('limits must be an object (the engine’s workspace limits)');
  const o: FileToolOptions = req.options ?? {};
  if (typeof o !== 'object' || o === null || Array.isArray(o)) throw bad('options must be an object');
  // The engine's own validation (and error messages), run on what it sent; it passed it at boot already.
  const options = resolveWorkspaceOptions({
    root,
    limits: req.limits,
    maxScanEntries: o.maxScanEntries,
    maxRegexLength: o.maxRegexLength,
    grepFileTimeoutMs: o.grepFileTimeoutMs,
  });
  const outcome = await new FileOperations(options).execute(root, req.request);
  return { outcome };
}

/**
 * `WorkspaceManager.snapshot` (workspace-manager.service.ts) without the manager: the same walk from the real root,
 * directories and the session's home skipped, at most `maxEntries` recorded, `${size}:${mtimeMs}:${ino}` per entry. (Marking the usage
 * stale, which the manager also does, has no meaning in a process that keeps no count.)
 */
async function snapshot(root: string, req: SnapshotToolRequest): Promise<WorkspaceToolResults['snapshot']> {
  const maxEntries = positive(req.maxEntries, 'maxEntries', DEFAULT_SNAPSHOT_ENTRIES);
  const maxScanEntries = positive(req.maxScanEntries, 'maxScanEntries', DEFAULT_SCAN_ENTRIES);
  const entries: [string, string][] = [];
  const state: WalkState = { scanned: 0, partial: false };
  // Walks verify each directory against its real path, so they must start from one.
  const start = await realRootOf(root);
  const opts = { recursive: true, maxEntries: maxScanEntries, skipTop: new Set([SESSION_HOME_NAME]) };
  for await (const e of walk(start, opts, state)) {
    if (e.type === 'dir') continue;
    if (entries.length === maxEntries) {
      state.partial = true;
      break;
    }
    entries.push([e.rel, `${e.stat.size}:${e.stat.mtimeMs}:${e.stat.ino}`]);
  }
  return { snapshot: { entries, partial: state.partial } };
}

/** `WorkspaceFiles.read` (libs/browser/src/workspace-files.ts): a regular, single-link file of at most `maxBytes`. */
async function readBytes(
  root: string,
  req: ReadBytesToolRequest,
): Promise<WorkspaceToolResults['readBytes']> {
  const limits = limitsOf(req.limits);
  const maxBytes = positive(req.maxBytes, 'maxBytes', limits.maxFileBytes);
  const field = fieldOf(req.field);
  const rp = await realPathInside(root, req.path, field, {
    rejectRoot: true,
    maxPathLength: limits.maxPathLength,
  });
  if (!rp.stat) throw new FileOpError('ENOENT', `${rp.rel} does not exist`, { path: rp.rel });
  const dir = openDirInsideSync(rp.realRoot, parentOf(rp.realRel), field);
  let fd: number;
  try {
    fd = openFileInSync(dir, path.basename(rp.realRel), C.O_RDONLY, field, rp.rel);
  } finally {
    closeSync(dir);
  }
  try {
    const st = assertPlainFd(fd, field, rp.rel);
    if (st.size > maxBytes) {
      throw new FileOpError(
        'FILE_TOO_LARGE',
        `${rp.rel} is ${st.size} bytes, over the ${maxBytes}-byte cap`,
        {
          path: rp.rel,
        },
      );
    }
    const buffer = await readFdUpTo(fd, st.size);
    return {
      base64: buffer.toString('base64'),
      size: buffer.length,
      name: path.basename(rp.rel),
      realRel: rp.realRel,
    };
  } finally {
    closeSync(fd);
  }
}

/**
 * `WorkspaceFiles.write`: atomic (`writeFileAtomic`, the file API's own), mode and (as root) owner of the
 * workspace root, refused past the workspace cap; plus a cap on the content itself (`maxBytes`).
 */
async function writeBytes(
  root: string,
  req: WriteBytesToolRequest,
): Promise<WorkspaceToolResults['writeBytes']> {
  const limits = limitsOf(req.limits);
  const maxBytes = positive(req.maxBytes, 'maxBytes', limits.maxFileBytes);
  const maxScanEntries = positive(req.maxScanEntries, 'maxScanEntries', DEFAULT_SCAN_ENTRIES);
  const field = fieldOf(req.field);
  if (typeof req.base64 !== 'string' || !BASE64.test(req.base64) || req.base64.length % 4 !== 0) {
    throw bad('base64 must be a base64 string');
  }
  if (req.mkdirs !== undefined && typeof req.mkdirs !== 'boolean') throw bad('mkdirs must be a boolean');
  const bytes = Buffer.from(req.base64, 'base64');
  const rp = await realPathInside(root, req.path, field, {
    rejectRoot: true,
    maxPathLength: limits.maxPathLength,
  });
  if (rp.stat?.isDirectory()) throw new FileOpError('EISDIR', `${rp.rel} is a directory`, { path: rp.rel });
  if (bytes.length > maxBytes) {
    throw new FileOpError(
      'FILE_TOO_LARGE',
      `${rp.rel} would be ${bytes.length} bytes, over the ${maxBytes}-byte cap`,
      { path: rp.rel, size: bytes.length, cap: maxBytes },
    );
  }
  const maxWorkspace = limits.maxWorkspaceBytes;
  const used = (await diskUsage(rp.realRoot, maxScanEntries)).bytes;
  const after = used - (rp.stat?.isFile() ? rp.stat.size : 0) + bytes.length;
  if (after > maxWorkspace) {
    throw new FileOpError(
      'WORKSPACE_FULL',
      `writing ${rp.rel} (${bytes.length} bytes) would take the workspace over its ${maxWorkspace}-byte cap`,
      { path: rp.rel },
    );
  }
  const policy = newEntryPolicy(rp.rootStat);
  const dir = openDirInsideSync(
    rp.realRoot,
    parentOf(rp.realRel),
    field,
    req.mkdirs === false ? undefined : policy.dir,
  );
  try {
    await writeFileAtomic(dir, path.basename(rp.realRel), bytes, { rel: rp.rel, field, as: policy.file });
  } catch (err) {
    throw toFileOpError(err, rp.rel);
  } finally {
    closeSync(dir);
  }
  return { size: bytes.length, realRel: rp.realRel };
}

/** `diskUsage` (what the workspace cap measures: apparent size of regular files), plus how many there are. */
async function usage(root: string, req: UsageToolRequest): Promise<WorkspaceToolResults['usage']> {
  const maxEntries = positive(req.maxScanEntries, 'maxScanEntries', DEFAULT_SCAN_ENTRIES);
  const state: WalkState = { scanned: 0, partial: false };
  let bytes = 0;
  let files = 0;
  for await (const e of walk(await realRootOf(root), { recursive: true, maxEntries }, state)) {
    if (e.type !== 'file') continue;
    bytes += e.stat.size;
    files++;
  }
  return { bytes, files, partial: state.partial };
}

// ------------------------------------------------------------------ request checks

const OPS: ReadonlySet<string> = new Set(WORKSPACE_TOOL_OPS);
const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

/** The request's envelope; an op's own fields are checked by the op (as the host's code checks them). */
function checkRequest(input: unknown): WorkspaceToolRequest {
  if (!isRecord(input)) throw bad('the request must be a JSON object');
  if (typeof input.op !== 'string' || !OPS.has(input.op)) {
    throw bad(`op must be one of ${WORKSPACE_TOOL_OPS.join(', ')}`, { op: input.op });
  }
  if (input.root !== undefined && (typeof input.root !== 'string' || !path.isAbsolute(input.root))) {
    throw bad('root must be an absolute path');
  }
  return input as unknown as WorkspaceToolRequest;
}

function limitsOf(input: unknown): WorkspaceLimits {
  if (input !== undefined && !isRecord(input)) throw bad('limits must be an object');
  const limits = { ...DEFAULT_WORKSPACE_LIMITS, ...input };
  for (const [name, value] of Object.entries(limits)) positive(value, `limits.${name}`, 0);
  return limits;
}

function positive(value: unknown, name: string, def: number): number {
  if (value === undefined) return def;
  if (typeof value !== 'number' || !Number.isSafeInteger(value) || value <= 0) {
    throw bad(`${name} must be a positive integer`, { [name]: value });
  }
  return value;
}

function fieldOf(value: unknown): string {
  if (value === undefined) return 'path';
  if (typeof value !== 'string' || value === '') throw bad('field must be a non-empty string');
  return value;
}

function bad(message: string, details: Record<string, unknown> = {}): WorkspaceToolError {
  return new WorkspaceToolError('BAD_REQUEST', message, details);
}

function parentOf(rel: string): string {
  const d = path.posix.dirname(rel);
  return d === '.' ? '' : d;
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
