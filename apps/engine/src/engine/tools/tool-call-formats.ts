import {
  jsonInputProblem,
  jsonShapeExceeds,
  jsonWideObjectProblem,
  MAX_JSON_DEPTH,
  MAX_JSON_VALUES,
  MAX_OBJECT_KEYS,
} from '../../platform/validation/json-input';

/**
 * The wire shape a call came in, which its answer keeps: `plain` `{id, name, input}`, Anthropic's `tool_use` block
 * `{type: "tool_use", id, name, input}`, or an OpenAI tool call `{id, type: "function", function: {name, arguments}}`.
 */
export type ToolCallFormat = 'plain' | 'anthropic' | 'openai';

/** A call's own fields that can be wrong before any tool reads it. */
export type CallField = 'type' | 'function' | 'arguments';

/** A call read from its wire shape. */
export interface ToolCall {
  id: string;
  format: ToolCallFormat;
  /** The tool name, as sent (not yet checked). */
  name: unknown;
  /** The input as sent (`arguments` parsed), not yet checked; undefined when absent. */
  input: unknown;
  /** What is wrong with the call's own fields, if anything: the answer is then an `is_error` result naming it. */
  invalid?: { field: CallField; message: string };
}

/** The `tool_result` a plain `{id, name, input}` call gets (the answer's original shape). */
export interface ToolResult {
  tool_use_id: string;
  content: string;
  is_error: boolean;
}

/** Anthropic: a `tool_result` content block, to put as is in the next user message. */
export interface AnthropicToolResult extends ToolResult {
  type: 'tool_result';
}

/** OpenAI: the result with the call's id under both names, and `message`, to append as is to `messages`. */
export interface OpenAiToolResult extends ToolResult {
  tool_call_id: string;
  message: { role: 'tool'; tool_call_id: string; content: string };
}

export type ToolAnswer = ToolResult | AnthropicToolResult | OpenAiToolResult;

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const kindOf = (v: unknown): string =>
  v === null ? 'null' : Array.isArray(v) ? 'an array' : `a ${typeof v}`;

/**
 * OpenAI's `arguments`: a string of JSON (as the model wrote it) or an object a client already parsed. An empty
 * string or `null` is no input. A string is held to the same limits as a request body (depth, forbidden keys).
 */
function readArguments(args: unknown): Pick<ToolCall, 'input' | 'invalid'> {
  const invalid = (message: string): Pick<ToolCall, 'input' | 'invalid'> => ({
    input: undefined,
    invalid: { field: 'arguments', message },
  });
  if (args === undefined || args === null || isObject(args)) return { input: args ?? undefined };
  if (typeof args !== 'string')
    return invalid(`must be a string of JSON (or an object), not ${kindOf(args)}`);
  if (args.trim() === '') return { input: undefined };
  // Bounded before parsing, as a body is: the arguments string may hold far more values than its own bytes suggest.
  const exceeds = jsonShapeExceeds(args, MAX_JSON_DEPTH, MAX_JSON_VALUES);
  if (exceeds === 'depth') return invalid(`nested deeper than ${MAX_JSON_DEPTH} levels`);
  if (exceeds === 'values') return invalid(`holds more than ${MAX_JSON_VALUES} values`);
  const wide = jsonWideObjectProblem(args, MAX_OBJECT_KEYS);
  if (wide) return invalid(`${wide.field === 'body' ? '' : `${wide.field}: `}${wide.message}`);
  let parsed: unknown;
  try {
    parsed = JSON.parse(args);
  } catch (err) {
    return invalid(`not valid JSON (${(err as Error).message})`);
  }
  const problem = jsonInputProblem(parsed);
  if (problem) return invalid(`${problem.field === 'body' ? '' : `${problem.field}: `}${problem.message}`);
  if (parsed !== null && !isObject(parsed)) return invalid(`must be a JSON object, not ${kindOf(parsed)}`);
  return { input: parsed ?? undefined };
}

/** Reads a call in any of the accepted shapes; `id` has been checked by the caller. */
export function readToolCall(raw: Record<string, unknown>, id: string): ToolCall {
  const { type } = raw;
  // A client that drops OpenAI's `type` still sends `function` and no `name`.
  const openai = type === 'function' || (type === undefined && raw.name === undefined && 'function' in raw);
  if (openai) {
    const fn = raw.function;
    if (!isObject(fn)) {
      return {
        id,
        format: 'openai',
        name: undefined,
        input: undefined,
        invalid: { field: 'function', message: `must be an object {name, arguments}, not ${kindOf(fn)}` },
      };
    }
    return { id, format: 'openai', name: fn.name, ...readArguments(fn.arguments) };
  }
  const call: ToolCall = { id, format: 'plain', name: raw.name, input: raw.input };
  if (type === 'tool_use') return { ...call, format: 'anthropic' };
  if (type === undefined) return call;
  return {
    ...call,
    invalid: {
      field: 'type',
      message:
        `must be "tool_use" (an Anthropic tool_use block) or "function" (an OpenAI tool call), or absent ` +
        `({id, name, input}); got ${typeof type === 'string' ? JSON.stringify(type.slice(0, 64)) : kindOf(type)}`,
    },
  };
}

/** The result in the shape of the call's API. */
export function answerFor(
  call: Pick<ToolCall, 'id' | 'format'>,
  result: Omit<ToolResult, 'tool_use_id'>,
): ToolAnswer {
  const { content, is_error } = result;
  switch (call.format) {
    case 'plain':
      return { tool_use_id: call.id, content, is_error };
    case 'anthropic':
      return { type: 'tool_result', tool_use_id: call.id, content, is_error };
    case 'openai':
      return {
        tool_use_id: call.id,
        tool_call_id: call.id,
        content,
        is_error,
        message: { role: 'tool', tool_call_id: call.id, content },
      };
  }
}
