import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';

/** OpenAPI schema of `POST /v1/sessions/:id/tool-calls`' body: the call shapes it reads (its answers: tool.schemas.ts). */

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

const callId = {
  type: 'string',
  minLength: 1,
  description: "The model's id of the function call; echoed in the answer and its `function_call_output`.",
};

const responsesCall: SchemaObject = {
  title: 'OpenAI Responses function_call item',
  type: 'object',
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

const otherResponsesCall: SchemaObject = {
  title: 'Any other function_call item',
  type: 'object',
  description:
    'A `function_call` item with a `call_id` but otherwise not as above is answered too, `is_error: true` and what ' +
    'is wrong; a `function_call` item with neither `call_id` nor `id` is a 400.',
};

const otherCall: SchemaObject = {
  title: 'Any other call',
  type: 'object',
  description:
    'A call in none of the shapes above (an unknown tool, a wrong `type`, input that is not an object…) is still ' +
    'answered, with `is_error: true` and what is wrong, as a model can act on it; only a missing `id` is a 400.',
};

/**
 * One call: an object with a non-empty string `id` (a Responses API `function_call` item: `call_id`; else 400). The
 * shapes it is read in are listed; anything else about a call is the model's to fix, in its answer, never an HTTP
 * error.
 */
const call: SchemaObject = {
  anyOf: [
    {
      type: 'object',
      required: ['id'],
      properties: { id },
      anyOf: [plainCall, anthropicCall, openAiCall, otherCall],
    },
    {
      type: 'object',
      required: ['type', 'call_id'],
      properties: { type: { type: 'string', enum: ['function_call'] }, call_id: callId },
      anyOf: [responsesCall, otherResponsesCall],
    },
  ],
};

export const TOOL_CALLS_BODY: SchemaObject = {
  oneOf: [
    call,
    { type: 'array', items: call, description: 'Run in order; the answer is an array in that order.' },
  ],
};
