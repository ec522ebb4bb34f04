import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ref } from '../http/common.schemas';

/**
 * OpenAPI schemas of `POST /v1/sessions/:id/tool-calls`' body: the call shapes it reads (its answers:
 * tool.schemas.ts). Each shape is a registered schema, named: generated clients make a type of each, and one name
 * per shape keeps them apart (inline shapes with titles repeated in the single call and the array collide).
 */

const id = { type: 'string', minLength: 1, description: "The model's id of the call; echoed in the answer." };
const input: SchemaObject = {
  type: 'object',
  additionalProperties: true,
  description: "The tool's fields; `null` for a field counts as absent.",
};

const PLAIN_TOOL_CALL: SchemaObject = {
  type: 'object',
  description: 'A call as `{id, name, input}`',
  required: ['id', 'name'],
  properties: { id, name: { type: 'string' }, input },
};

const ANTHROPIC_TOOL_USE: SchemaObject = {
  type: 'object',
  description: 'An Anthropic `tool_use` content block, as the model wrote it',
  required: ['type', 'id', 'name'],
  properties: { type: { type: 'string', enum: ['tool_use'] }, id, name: { type: 'string' }, input },
};

const OPENAI_TOOL_CALL: SchemaObject = {
  type: 'object',
  description: 'An OpenAI Chat Completions tool call (an item of the message’s `tool_calls`)',
  required: ['id', 'type', 'function'],
  properties: {
    id,
    type: { type: 'string', enum: ['function'] },
    function: {
      type: 'object',
      required: ['name'],
      properties: {
        name: { type: 'string' },
        arguments: {
          oneOf: [{ type: 'string' }, { type: 'object', additionalProperties: true }],
          description:
            "The tool's fields as a JSON string (as the model wrote it) or an already parsed object. JSON that " +
            'does not parse is an `is_error` result naming `arguments`.',
        },
      },
    },
  },
};

const OTHER_TOOL_CALL: SchemaObject = {
  type: 'object',
  description:
    'A call in none of the shapes above (an unknown tool, a wrong `type`, input that is not an object…) is still ' +
    'answered, with `is_error: true` and what is wrong, as a model can act on it; only a missing `id` is a 400.',
  required: ['id'],
  properties: { id },
  additionalProperties: true,
};

const callId = {
  type: 'string',
  minLength: 1,
  description: "The model's id of the function call; echoed in the answer and its `function_call_output`.",
};

const RESPONSES_FUNCTION_CALL: SchemaObject = {
  type: 'object',
  description: 'An OpenAI Responses API `function_call` output item, as the model wrote it',
  required: ['type', 'call_id', 'name'],
  properties: {
    type: { type: 'string', enum: ['function_call'] },
    call_id: callId,
    name: { type: 'string' },
    arguments: {
      type: 'string',
      description: "The tool's fields as a JSON string, as the model wrote it.",
    },
    id: { type: 'string', description: 'The item’s own id (`fc_…`), not used.' },
    status: { type: 'string' },
  },
};

const OTHER_FUNCTION_CALL: SchemaObject = {
  type: 'object',
  description:
    'A `function_call` item with a `call_id` but otherwise not as above is answered too, `is_error: true` and what ' +
    'is wrong; a `function_call` item with neither `call_id` nor `id` is a 400.',
  required: ['type', 'call_id'],
  properties: { type: { type: 'string', enum: ['function_call'] }, call_id: callId },
  additionalProperties: true,
};

/**
 * One call: an object with a non-empty string `id` (a Responses API `function_call` item: `call_id`; else 400). The
 * shapes it is read in are listed; anything else about a call is the model's to fix, in its answer, never an HTTP
 * error.
 */
const TOOL_CALL: SchemaObject = {
  description: 'One tool call, in any of the shapes the engine reads',
  anyOf: [
    ref('PlainToolCall'),
    ref('AnthropicToolUse'),
    ref('OpenAiToolCall'),
    ref('ResponsesFunctionCall'),
    ref('OtherToolCall'),
    ref('OtherFunctionCall'),
  ],
};

export const TOOL_CALL_SCHEMAS = {
  ToolCall: TOOL_CALL,
  PlainToolCall: PLAIN_TOOL_CALL,
  AnthropicToolUse: ANTHROPIC_TOOL_USE,
  OpenAiToolCall: OPENAI_TOOL_CALL,
  ResponsesFunctionCall: RESPONSES_FUNCTION_CALL,
  OtherToolCall: OTHER_TOOL_CALL,
  OtherFunctionCall: OTHER_FUNCTION_CALL,
} satisfies Record<string, SchemaObject>;

export const TOOL_CALLS_BODY: SchemaObject = {
  oneOf: [
    ref('ToolCall'),
    {
      type: 'array',
      items: ref('ToolCall'),
      description: 'Run in order; the answer is an array in that order.',
    },
  ],
};
