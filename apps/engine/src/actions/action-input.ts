import { createHash } from 'node:crypto';
import type { ActionBody } from './dto/action-body';
import { describeBrowserAction } from './dto/browser-action.dto';

const SUMMARY_CHARS = 200;

const oneLine = (s: string): string => s.replace(/\s+/g, ' ').trim();
const clip = (s: string, n = SUMMARY_CHARS): string => (s.length > n ? `${s.slice(0, n - 1)}…` : s);

/** Short human summary of an action's input, for logs and graph nodes. */
export function summarizeInput(body: ActionBody): string {
  switch (body.type) {
    case 'code':
      return clip(`${body.language}: ${oneLine(body.code)}`);
    case 'file':
      return clip(`${body.op} ${body.path ?? '.'}${'to' in body ? ` -> ${body.to}` : ''}`);
    case 'browser':
      return clip(oneLine(describeBrowserAction(body)));
  }
}

/** What the action ran: the op for files and browsers, the language for code. */
export const operationOf = (body: ActionBody): string => (body.type === 'code' ? body.language : body.op);

function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value && typeof value === 'object') {
    const entries = Object.entries(value as Record<string, unknown>)
      .filter(([, v]) => v !== undefined)
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    return `{${entries.map(([k, v]) => `${JSON.stringify(k)}:${canonical(v)}`).join(',')}}`;
  }
  return JSON.stringify(value);
}

/** sha256 of the canonical JSON of the input: equal inputs hash equal whatever their key order. */
export const hashInput = (input: unknown): string =>
  createHash('sha256').update(canonical(input)).digest('hex');

/** The DTO as a plain object, without undefined fields. */
export const plainInput = (body: ActionBody): Record<string, unknown> =>
  JSON.parse(JSON.stringify(body)) as Record<string, unknown>;
