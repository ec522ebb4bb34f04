import type { BrowserRequest } from '@switchyard/browser';
import type { CodeSpec } from '@switchyard/sandbox';
import type { FileOp } from '@switchyard/workspace';

/**
 * The engine's own currency: an action as the libraries' request types describe it, past HTTP validation. The HTTP
 * edge (controllers, tool calls, plan submission) builds these from validated bodies; everything after it (the
 * engine, handlers, plans, retries) takes them as they are. Plain JSON, identical to the body that was sent, so it is
 * what the graph records as the action's input and what a retry reruns.
 */
export type CodeActionRequest = { type: 'code' } & CodeSpec;
export type FileActionRequest = { type: 'file' } & FileOp;
export type BrowserActionRequest = { type: 'browser' } & BrowserRequest;

export type ActionRequest = CodeActionRequest | FileActionRequest | BrowserActionRequest;

/** A request of one type. */
export type RequestOf<T extends ActionRequest['type']> = Extract<ActionRequest, { type: T }>;

/** The request as a plain object without undefined fields: what the graph records as the action's input. */
export const plainInput = (request: ActionRequest): Record<string, unknown> =>
  JSON.parse(JSON.stringify(request)) as Record<string, unknown>;
