import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';

/** OpenAPI schemas of `POST /v1/sessions/:id/tool-calls`: the call shapes it reads and the answers it writes. */

const id = { type: 'string', minLength: 1, description: "The model's id of the call; echoed in the answer." };
const input = { type: 'object', description: "The tool's fields; `null` for a field counts as absent." };

const plainCall: SchemaObject = {
  title: 'Tool call',
  type: 'object',
  required: ['id', 'name'],
  properties: { id, name: { type: 'string' }, input },
};

const anthropicCall: SchemaObject = {
  title: 'Anthropic tool_use block',
  type: 'object',
  required: ['type', 'id', 'name'],
  properties: { type: { type: 'string', enum: ['tool_use'] }, id, name: { type: 'string' }, input },
};

const openAiCall: SchemaObject = {
  title: 'OpenAI tool call',
  type: 'object',
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
          oneOf: [{ type: 'string' }, { type: 'object' }],
          description:
            "The tool's fields as a JSON string (as the model wrote it) or an already parsed object. JSON that " +
            'does not parse is an `is_error` result naming `arguments`.',
        },
      },
    },
  },
};

const call: SchemaObject = { oneOf: [plainCall, anthropicCall, openAiCall] };

export const TOOL_CALLS_BODY: SchemaObject = {
  oneOf: [
    call,
    { type: 'array', items: call, description: 'Run in order; the answer is an array in that order.' },
  ],
};

const result = {
  tool_use_id: { type: 'string' },
  content: { type: 'string' },
  is_error: { type: 'boolean' },
};

const plainResult: SchemaObject = {
  title: 'Tool result (for a {id, name, input} call)',
  type: 'object',
  required: ['tool_use_id', 'content', 'is_error'],
  properties: result,
};

const anthropicResult: SchemaObject = {
  title: 'Anthropic tool_result block (for a tool_use block)',
  description: 'A `tool_result` content block, to put as is in the next user message.',
  type: 'object',
  required: ['type', 'tool_use_id', 'content', 'is_error'],
  properties: { type: { type: 'string', enum: ['tool_result'] }, ...result },
};

const openAiResult: SchemaObject = {
  title: 'OpenAI tool result (for an OpenAI tool call)',
  description:
    '`message` is the `role: "tool"` message to append as is to `messages` (OpenAI refuses unknown fields in a ' +
    'message, so `is_error` stays outside it).',
  type: 'object',
  required: ['tool_use_id', 'tool_call_id', 'content', 'is_error', 'message'],
  properties: {
    ...result,
    tool_call_id: { type: 'string' },
    message: {
      type: 'object',
      required: ['role', 'tool_call_id', 'content'],
      properties: {
        role: { type: 'string', enum: ['tool'] },
        tool_call_id: { type: 'string' },
        content: { type: 'string' },
      },
    },
  },
};

const answer: SchemaObject = { oneOf: [plainResult, anthropicResult, openAiResult] };

export const TOOL_CALLS_ANSWER: SchemaObject = { oneOf: [answer, { type: 'array', items: answer }] };
