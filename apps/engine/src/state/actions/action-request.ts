import type { BrowserRequest } from '@switchyard/browser';
import type { Language, TierRequest } from '@switchyard/common';
import type { CodeSpec, ProcessSignal, StatefulTier } from '@switchyard/sandbox';
import type { FileOp } from '@switchyard/workspace';

/**
 * The engine's own currency: an action as the libraries' request types describe it, past HTTP validation. The HTTP
 * edge (controllers, tool calls, plan submission) builds these from validated bodies; everything after it (the
 * engine, handlers, plans, retries) takes them as they are. Plain JSON, identical to the body that was sent, so it is
 * what the graph records as the action's input and what a retry reruns.
 */
export type CodeActionRequest = { type: 'code' } & CodeSpec;
export type FileActionRequest = ({ type: 'file' } & FileOp) | FileTransferRequest;

/**
 * A file or a directory moved in or out through the file transfer API (`…/files/content`, `…/files/archive`),
 * recorded as a `file` action like any other. Its bytes are a stream handed to the handler beside the request
 * (`FileTransferChannel`), never part of it: no action body can name these ops, and a retry of one is refused.
 */
export type FileTransferRequest =
  | { type: 'file'; op: 'upload'; path: string; overwrite?: boolean }
  | { type: 'file'; op: 'download'; path: string; range?: { start: number; end?: number } }
  | { type: 'file'; op: 'upload_archive'; path: string }
  | { type: 'file'; op: 'download_archive'; path: string };
export const FILE_TRANSFER_OPS: ReadonlySet<string> = new Set([
  'upload',
  'download',
  'upload_archive',
  'download_archive',
]);
export type BrowserActionRequest = { type: 'browser' } & BrowserRequest;

/** A background process to start, or one to look at or act on (by id or name). */
export type ProcessOperation =
  | {
      op: 'start';
      command: string;
      name?: string;
      cwd?: string;
      env?: Record<string, string>;
      tier?: TierRequest;
    }
  | { op: 'list' }
  | { op: 'logs'; processId: string; tail?: number; sinceSeq?: number }
  | { op: 'write'; processId: string; data: string; eof?: boolean }
  | { op: 'signal'; processId: string; signal: ProcessSignal }
  | { op: 'stop'; processId: string; graceMs?: number }
  | { op: 'wait'; processId: string; timeoutMs: number };
export type ProcessActionRequest = { type: 'process' } & ProcessOperation;

/** Kernels are driven by the session's code actions; this restarts them (state cleared). */
export type KernelActionRequest = { type: 'kernel'; op: 'restart'; language: Language; tier?: StatefulTier };

/** A skill (a tool made of other tools) called by name with its input; the skill's schema checks the input. */
export type SkillActionRequest = { type: 'skill'; name: string; input: Record<string, unknown> };

/**
 * A terminal of the session (a PTY running a login bash in its stateful sandbox), opened and closed through the
 * terminals API (`POST`/`DELETE …/terminals`) and recorded as a `terminal` action: to policies a terminal is bash.
 * What is typed and shown goes over the terminal's WebSocket, never through an action. No action body can name this
 * type, and a retry of one is refused: a terminal without its client is of no use. `close` with a `reason` records
 * the end of a terminal that ended by itself (its shell exited, it idled out, its sandbox was lost).
 */
export type TerminalActionRequest =
  | {
      type: 'terminal';
      op: 'open';
      terminalId: string;
      cols: number;
      rows: number;
      cwd?: string;
      command?: string;
      env?: Record<string, string>;
    }
  | { type: 'terminal'; op: 'close'; terminalId: string; reason?: 'exited' | 'idle' | 'sandbox_lost' };

export type ActionRequest =
  | CodeActionRequest
  | FileActionRequest
  | BrowserActionRequest
  | ProcessActionRequest
  | KernelActionRequest
  | SkillActionRequest
  | TerminalActionRequest;

/** A request of one type. */
export type RequestOf<T extends ActionRequest['type']> = Extract<ActionRequest, { type: T }>;

/** The request as a plain object without undefined fields: what the graph records as the action's input. */
export const plainInput = (request: ActionRequest): Record<string, unknown> =>
  JSON.parse(JSON.stringify(request)) as Record<string, unknown>;
