import { JsonInputProblem, parseBoundedJson } from '../../platform/validation/json-input';
import { RequestValidationError } from '../../platform/validation/request-validation.error';

/**
 * The wire shape a call came in, which its answer keeps: `plain` `{id, name, input}`, Anthropic's `tool_use` block
 * `{type: "tool_use", id, name, input}`, an OpenAI Chat Completions tool call `{id, type: "function", function: {name,
 * arguments}}`, or an OpenAI Responses API `function_call` item `{type: "function_call", call_id, name, arguments}`.
 */
export type ToolCallFormat = 'plain' | 'anthropic' | 'openai' | 'responses';

/** A call's own fields that can be wrong before any tool reads it. */
export type CallField = 'type' | 'function' | 'arguments' | 'call_id';

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
  // Bounded as a request body is: the arguments string may hold far more values than its own bytes suggest.
  let parsed: unknown;
  try {
    parsed = parseBoundedJson(args);
  } catch (err) {
    if (!(err instanceof JsonInputProblem)) throw err;
    return invalid(`${err.field === 'body' ? '' : `${err.field}: `}${err.message}`);
  }
  if (parsed !== null && !isObject(parsed)) return invalid(`must be a JSON object, not ${kindOf(parsed)}`);
  return { input: parsed ?? undefined };
}

/** Reads a call in any of the accepted shapes; `id` has been checked by the caller. */
export function readToolCall(raw: Record<string, unknown>, id: string): ToolCall {
  const { type } = raw;
  if (type === 'function_call') {
    const call: ToolCall = { id, format: 'responses', name: raw.name, ...readArguments(raw.arguments) };
    return isId(raw.call_id)
      ? call
      : {
          ...call,
          invalid: { field: 'call_id', message: 'must be a non-empty string: the function call it answers' },
        };
  }
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
        `must be "tool_use" (an Anthropic tool_use block), "function" (an OpenAI tool call) or "function_call" ` +
        `(an OpenAI Responses API function_call item), or absent ` +
        `({id, name, input}); got ${typeof type === 'string' ? JSON.stringify(type.slice(0, 64)) : kindOf(type)}`,
    },
  };
}

/**
 * The call's id, or a 400: without one there is nothing to answer a model with. A Responses API `function_call` item
 * is answered by its `call_id` (its `id` is the item's own; without a `call_id` it is the id, and the answer says the
 * `call_id` is missing); any other call by its `id`.
 */
export function callId(call: unknown, at: string): string {
  if (!isObject(call)) throw missingId(at, 'id');
  if (call.type === 'function_call' && isId(call.call_id)) return call.call_id;
  if (isId(call.id)) return call.id;
  throw missingId(at, call.type === 'function_call' ? 'call_id' : 'id');
}

const isId = (v: unknown): v is string => typeof v === 'string' && v.length > 0;

function missingId(at: string, field: 'id' | 'call_id'): RequestValidationError {
  return new RequestValidationError([
    {
      field: `${at ? `${at}.` : ''}${field}`,
      message:
        field === 'call_id'
          ? 'a function_call item needs a non-empty string call_id'
          : 'each tool call needs a non-empty string id (the tool_use or tool_call id)',
    },
  ]);
}
