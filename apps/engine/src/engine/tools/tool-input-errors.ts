import type { ToolDefinition } from './tool-catalog';

const escape = (s: string): string => s.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');

/**
 * A message about action fields, in the tool's names: validation messages start each clause with the field
 * (`code must be a string; …`), which for `bash` is `command`.
 */
export function inToolTerms(tool: Pick<ToolDefinition, 'renames'>, message: string): string {
  let out = message;
  for (const [from, to] of Object.entries(tool.renames)) {
    if (from !== to) out = out.replace(new RegExp(`(^|; )${escape(from)}\\b`, 'g'), `$1${to}`);
  }
  return out;
}

/**
 * An input problem as a model reads it: `<tool field>: <message>`, both in the tool's names. A problem with a field
 * the tool sets itself (`type`, `op`, a code tool's `language`) is about the input as a whole, so it names none.
 */
export function toolProblem(
  tool: Pick<ToolDefinition, 'renames' | 'fields'>,
  field: string | undefined,
  message: string,
): string {
  const text = inToolTerms(tool, message);
  if (field === undefined) return text;
  const head = /^[^.[]*/.exec(field)![0];
  const own = Object.hasOwn(tool.renames, head) ? tool.renames[head] : head;
  if (!tool.fields.includes(own)) return text;
  return `${own}${field.slice(head.length)}: ${text}`;
}
