import { type ErrorKind, InvalidInputError, NotFoundError } from '@switchyard/common';
import type { FileOp, FileOpOutcome, WorkspaceLimits, WorkspaceSnapshot } from '../file-op.types';
import { changedPaths as diff } from '../snapshot-diff';
import {
  FileOpError,
  type FileOpErrorCode,
  PathRejectedError,
  type PathRejectionCode,
} from '../workspace.errors';

/**
 * The protocol of the pod's workspace tool (`workspace-tool.ts`, bundled by `scripts/build-pod-tools.mjs` into
 * `dist/pod/workspace-tool.js`). Where a session's workspace lives in its own pod, the engine cannot reach it with
 * `fs`; it runs this tool there instead (a fresh `node` per request): one JSON request on stdin, one JSON answer
 * (a single line) on stdout, exit code 0 whenever it answered, refusals included. The tool runs the very code the
 * host backend runs (`FileOperations`, the path guard, the walks), so answers and errors are the same; this file is
 * what both sides share: the types, `reviveError` (the answer's error back into the class the host backend throws)
 * and the pure `changedPaths` that diffs two snapshots.
 *
 * Every request may name the workspace `root` (absolute; default {@link WORKSPACE_TOOL_ROOT}).
 */

/** Where the workspace is mounted in the session's pod. */
export const WORKSPACE_TOOL_ROOT = '/workspace';

export const WORKSPACE_TOOL_OPS = ['file', 'snapshot', 'readBytes', 'writeBytes', 'usage'] as const;
export type WorkspaceToolOp = (typeof WORKSPACE_TOOL_OPS)[number];

interface ToolRequestBase {
  /** Absolute path of the workspace in the pod. Default `/workspace`. */
  root?: string;
}

/** What `WorkspaceOptions` carries for the file API besides the limits; each defaults as on the host. */
export interface FileToolOptions {
  /** Entries a walk (usage, list, find, grep) visits before it stops. Default 100 000. */
  maxScanEntries?: number;
  /** Longest grep pattern (chars). Default 1000. */
  maxRegexLength?: number;
  /** CPU time one grep may spend on a single file. Default 1000 ms. */
  grepFileTimeoutMs?: number;
}

/** One file API op: `FileOperations.execute(root, request)`. */
export interface FileToolRequest extends ToolRequestBase {
  op: 'file';
  request: FileOp;
  /** The engine's `WorkspaceOptions.limits`: pass them every time, the tool keeps nothing between runs. */
  limits: WorkspaceLimits;
  options?: FileToolOptions;
}

/** The picture `WorkspaceManager.snapshot` takes, for `changedPaths` around a code action. */
export interface SnapshotToolRequest extends ToolRequestBase {
  op: 'snapshot';
  /** Entries recorded before the snapshot is marked partial (`snapshotMaxEntries`). Default 10 000. */
  maxEntries?: number;
  /** The walk's own bound (`maxScanEntries`). Default 100 000. */
  maxScanEntries?: number;
}

/** Raw bytes of a regular, single-link file (an upload, an MCP image): `WorkspaceFiles.read`. */
export interface ReadBytesToolRequest extends ToolRequestBase {
  op: 'readBytes';
  path: string;
  /** Largest file answered. Default `limits.maxFileBytes`. */
  maxBytes?: number;
  /** Only `maxFileBytes` (the default cap) and `maxPathLength` are used. Defaults as on the host. */
  limits?: Partial<WorkspaceLimits>;
  /** Request field named in path refusals. Default `path`. */
  field?: string;
}

/** Raw bytes written atomically, replacing a file there (a screenshot, a download): `WorkspaceFiles.write`. */
export interface WriteBytesToolRequest extends ToolRequestBase {
  op: 'writeBytes';
  path: string;
  base64: string;
  /** Make missing parent directories (default true, as `WorkspaceFiles.write` does). */
  mkdirs?: boolean;
  /** Largest content accepted. Default `limits.maxFileBytes`: browser artifacts pass `maxArtifactBytes`. */
  maxBytes?: number;
  /** `maxWorkspaceBytes` (the workspace cap), `maxFileBytes` (the default cap), `maxPathLength`. */
  limits?: Partial<WorkspaceLimits>;
  /** Entries the usage walk visits (a lower bound past it). Default 100 000. */
  maxScanEntries?: number;
  field?: string;
}

/** Bytes and files the workspace holds, measured like the workspace cap measures them. */
export interface UsageToolRequest extends ToolRequestBase {
  op: 'usage';
  /** Default 100 000. */
  maxScanEntries?: number;
}

export type WorkspaceToolRequest =
  FileToolRequest | SnapshotToolRequest | ReadBytesToolRequest | WriteBytesToolRequest | UsageToolRequest;

/** A snapshot as JSON: the map's entries in walk order (the order `changedPaths` relies on). */
export interface WireSnapshot {
  /** `[relative path, "size:mtimeMs:ino"]`, files and links, never directories. */
  entries: [string, string][];
  partial: boolean;
}

/** What each op answers when it succeeds (besides `ok: true`). */
export interface WorkspaceToolResults {
  file: { outcome: FileOpOutcome };
  snapshot: { snapshot: WireSnapshot };
  /** `realRel`: the real path (links resolved) relative to the root, for the graph; `name`: the base name. */
  readBytes: { base64: string; size: number; name: string; realRel: string };
  writeBytes: { size: number; realRel: string };
  /** `partial`: the walk stopped at `maxScanEntries`, so both counts are lower bounds. */
  usage: { bytes: number; files: number; partial: boolean };
}

/** The error classes an answer can carry; anything else is `Error` (an internal failure on the engine side). */
export type WireErrorName =
  | 'FileOpError'
  | 'PathRejectedError'
  | 'InvalidInputError'
  | 'NotFoundError'
  | 'WorkspaceToolError'
  | 'Error';

export interface WireError {
  name: WireErrorName;
  /** `FileOpError`/`PathRejectedError`/`InvalidInputError` code, an errno (`EIO`) or `INTERNAL`. */
  code: string;
  message: string;
  details: Record<string, unknown>;
  /** The `ErrorKind` the engine's HTTP mapping will see (informative: `reviveError` rebuilds it). */
  kind?: ErrorKind;
  /** Only for `Error`: where it came from, for the engine's log. */
  stack?: string;
}

export interface WorkspaceToolFailure {
  ok: false;
  error: WireError;
}

export type WorkspaceToolSuccess<O extends WorkspaceToolOp = WorkspaceToolOp> = {
  [K in O]: { ok: true } & WorkspaceToolResults[K];
}[O];

export type WorkspaceToolAnswer<O extends WorkspaceToolOp = WorkspaceToolOp> =
  WorkspaceToolSuccess<O> | WorkspaceToolFailure;

/**
 * The tool could not make sense of its request (not JSON, unknown op, a field of the wrong type): a bug of the
 * engine, never of the agent, so the engine must let it surface as an internal error (it is not a
 * `SwitchyardError`).
 */
export class WorkspaceToolError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly details: Record<string, unknown> = {},
  ) {
    super(message);
    // A literal, not `new.target.name`: the bundle is minified.
    this.name = 'WorkspaceToolError';
  }
}

/** The error's wire form. Classes are told apart with `instanceof`, since minification renames them. */
export function serializeError(err: unknown): WireError {
  if (err instanceof PathRejectedError) {
    return {
      name: 'PathRejectedError',
      code: err.code,
      message: err.message,
      details: err.details,
      kind: err.kind,
    };
  }
  if (err instanceof InvalidInputError) {
    return {
      name: 'InvalidInputError',
      code: err.code,
      message: err.message,
      details: err.details,
      kind: err.kind,
    };
  }
  if (err instanceof FileOpError) {
    return {
      name: 'FileOpError',
      code: err.code,
      message: err.message,
      details: err.details,
      kind: err.kind,
    };
  }
  if (err instanceof NotFoundError) {
    return {
      name: 'NotFoundError',
      code: err.code,
      message: err.message,
      details: err.details,
      kind: err.kind,
    };
  }
  if (err instanceof WorkspaceToolError) {
    return { name: 'WorkspaceToolError', code: err.code, message: err.message, details: err.details };
  }
  const e = err instanceof Error ? err : new Error(String(err));
  const code = (e as { code?: unknown }).code;
  return {
    name: 'Error',
    code: typeof code === 'string' ? code : 'INTERNAL',
    message: e.message,
    details: {},
    kind: 'internal',
    stack: e.stack,
  };
}

/**
 * The error of a failed answer as the host backend would have thrown it: the same class (`FileOpError`,
 * `PathRejectedError`, `InvalidInputError`, `NotFoundError`), so `instanceof` checks, `kind` (the HTTP status),
 * `errorClass`, `field`, `code`, `message` and `details` are all identical. A `WorkspaceToolError` comes back as
 * one; anything else as a plain `Error` (with `code`), which the engine treats as internal.
 */
export function reviveError(answer: WorkspaceToolFailure | WireError): Error {
  const w = 'ok' in answer ? answer.error : answer;
  const details = isRecord(w.details) ? w.details : {};
  const message = String(w.message);
  let err: Error;
  switch (w.name) {
    case 'PathRejectedError': {
      const field = typeof details.field === 'string' ? details.field : 'path';
      const p = typeof details.path === 'string' ? details.path : '';
      err = new PathRejectedError(field, p, w.code as PathRejectionCode, message);
      break;
    }
    case 'InvalidInputError': {
      const { field, ...rest } = details;
      err = new InvalidInputError(typeof field === 'string' ? field : '', message, w.code, rest);
      break;
    }
    case 'FileOpError':
      err = new FileOpError(w.code as FileOpErrorCode, message, details);
      break;
    case 'NotFoundError':
      err = new NotFoundError(message, details);
      break;
    case 'WorkspaceToolError':
      return new WorkspaceToolError(w.code, message, details);
    case 'Error':
    default: {
      const plain = new Error(message) as Error & { code?: string };
      plain.code = w.code;
      if (w.stack) plain.stack = `${plain.stack}\n  --- in the workspace tool:\n${w.stack}`;
      return plain;
    }
  }
  // The constructors rebuild `details` from their arguments; the wire's copy is the authority (a path the
  // constructor would shorten again, details a future version adds).
  Object.defineProperty(err, 'details', { value: details, enumerable: true, configurable: true });
  return err;
}

/**
 * Checks that `stdout` is one answer (one JSON object, optionally newline-terminated) and returns it. Throws a
 * `WorkspaceToolError` otherwise (a crashed or foreign tool), which the engine reports as internal.
 */
export function parseAnswer<O extends WorkspaceToolOp = WorkspaceToolOp>(
  stdout: string,
): WorkspaceToolAnswer<O> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(stdout);
  } catch {
    throw new WorkspaceToolError('BAD_ANSWER', `the workspace tool answered something that is not JSON`, {
      stdout: stdout.slice(0, 200),
    });
  }
  return checkAnswer<O>(parsed, stdout);
}

/**
 * Checks that an answer already parsed (the runner's own snapshot, which comes as a protocol message) has the shape of
 * one; throws `WorkspaceToolError` `BAD_ANSWER` otherwise.
 */
export function checkAnswer<O extends WorkspaceToolOp = WorkspaceToolOp>(
  parsed: unknown,
  raw = JSON.stringify(parsed) ?? String(parsed),
): WorkspaceToolAnswer<O> {
  if (!isRecord(parsed) || typeof parsed.ok !== 'boolean' || (!parsed.ok && !isRecord(parsed.error))) {
    throw new WorkspaceToolError('BAD_ANSWER', 'the workspace tool answered an object of the wrong shape', {
      stdout: raw.slice(0, 200),
    });
  }
  return parsed as unknown as WorkspaceToolAnswer<O>;
}

/** The answer's result, or its error thrown (revived). */
export function unwrapAnswer<O extends WorkspaceToolOp>(
  answer: WorkspaceToolAnswer<O>,
): WorkspaceToolSuccess<O> {
  if (!answer.ok) throw reviveError(answer);
  return answer;
}

export function snapshotToWire(s: WorkspaceSnapshot): WireSnapshot {
  return { entries: [...s.entries], partial: s.partial };
}

/** Back to `WorkspaceSnapshot` (a `Map` keeps the walk order of the array). */
export function snapshotFromWire(w: WireSnapshot): WorkspaceSnapshot {
  return { entries: new Map(w.entries), partial: w.partial };
}

/** `changedPaths` of snapshot-diff.ts (what `WorkspaceManager.changedPaths` answers), for snapshots in either form. */
export function changedPaths(
  before: WorkspaceSnapshot | WireSnapshot,
  after: WorkspaceSnapshot | WireSnapshot,
): string[] {
  return diff(asSnapshot(before), asSnapshot(after));
}

function asSnapshot(s: WorkspaceSnapshot | WireSnapshot): WorkspaceSnapshot {
  return s.entries instanceof Map ? (s as WorkspaceSnapshot) : snapshotFromWire(s as WireSnapshot);
}

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
