import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { FREE_OBJECT, object, ref } from '../http/common.schemas';
import { TOOL_CALL_SCHEMAS } from './tool-calls.openapi';

/**
 * Response schemas of the tool list (each model API's own tool shape) and of tool calls (`ToolAnswer`: the result in
 * the shape of the call).
 */

const INPUT_SCHEMA = FREE_OBJECT('JSON Schema of the tool’s input');

const ANTHROPIC_TOOL_SCHEMA: SchemaObject = object(
  ['name', 'description', 'input_schema'],
  { name: { type: 'string' }, description: { type: 'string' }, input_schema: INPUT_SCHEMA },
  'A tool as Anthropic’s `tools` takes it',
);

const OPENAI_TOOL_SCHEMA: SchemaObject = object(
  ['type', 'function'],
  {
    type: { type: 'string', enum: ['function'] },
    function: object(['name', 'description', 'parameters'], {
      name: { type: 'string' },
      description: { type: 'string' },
      parameters: INPUT_SCHEMA,
      strict: {
        type: 'boolean',
        description:
          'Only with `strict=true`. `true`: `parameters` is a schema OpenAI strict mode accepts, and it accepts every ' +
          'input the tool takes. `false`: a skill whose input schema strict mode cannot say (an object open to keys ' +
          'it does not name, a `oneOf` whose branches can overlap, …); `parameters` is then its schema as written',
      },
    }),
  },
  'A tool as OpenAI’s `tools` takes it',
);

const RESPONSES_TOOL_SCHEMA: SchemaObject = object(
  ['type', 'name', 'description', 'parameters', 'strict'],
  {
    type: { type: 'string', enum: ['function'] },
    name: { type: 'string' },
    description: { type: 'string' },
    parameters: INPUT_SCHEMA,
    strict: {
      type: 'boolean',
      description:
        'Always said, as the Responses API reads a function without it as strict. `true` (the default, or ' +
        '`strict=true`): `parameters` is a schema OpenAI strict mode accepts, and it accepts every input the tool ' +
        'takes. `false`: with `strict=false`, or a skill whose input schema strict mode cannot say; `parameters` is ' +
        'then the schema as written',
    },
  },
  'A function tool as the OpenAI Responses API’s `tools` takes it (flat: no `function` object)',
);

const TOOL_LIST_SCHEMA: SchemaObject = object(['tools'], {
  tools: {
    // anyOf, not oneOf: an empty list (a policy that leaves no tool) is a list of any format.
    description: 'Every tool the caller’s policy offers, in the format asked for',
    anyOf: [
      { type: 'array', items: ref('AnthropicTool'), title: 'format=anthropic' },
      { type: 'array', items: ref('OpenAiTool'), title: 'format=openai' },
      { type: 'array', items: ref('ResponsesTool'), title: 'format=openai-responses' },
    ],
  },
});

/** A wire shape of a model API, passed on as is: closed, which also tells the shapes apart. */
const closed = (schema: SchemaObject): SchemaObject => ({ ...schema, additionalProperties: false });

const IMAGE_TYPES = ['image/png', 'image/jpeg', 'image/gif', 'image/webp'];

const TEXT_BLOCK: SchemaObject = closed(
  object(['type', 'text'], {
    type: { type: 'string', enum: ['text'] },
    text: { type: 'string', minLength: 1 },
  }),
);

const ANTHROPIC_CONTENT: SchemaObject = {
  description:
    'What the tool did or why it failed, for the model: the text, or, when the answer attaches images (a read of a ' +
    'PNG, JPEG, GIF or WebP file, a cell’s image results, a browser screenshot; each within ' +
    'SWITCHYARD_TOOL_IMAGE_MAX_BYTES), Anthropic’s list of `text` and `image` blocks in order, each image after the ' +
    'text naming it',
  oneOf: [
    { type: 'string' },
    {
      type: 'array',
      minItems: 1,
      items: {
        oneOf: [
          TEXT_BLOCK,
          closed(
            object(['type', 'source'], {
              type: { type: 'string', enum: ['image'] },
              source: closed(
                object(['type', 'media_type', 'data'], {
                  type: { type: 'string', enum: ['base64'] },
                  media_type: { type: 'string', enum: IMAGE_TYPES },
                  data: { type: 'string', description: 'The image, base64' },
                }),
              ),
            }),
          ),
        ],
      },
    },
  ],
};

const RESULT = {
  tool_use_id: { type: 'string', description: 'The call’s id' },
  content: ANTHROPIC_CONTENT,
  is_error: { type: 'boolean' },
};

/** The text of an answer that carries no images: an image is a line naming it and where it is. */
const TEXT_CONTENT: SchemaObject = {
  type: 'string',
  description:
    'What the tool did or why it failed, as text; an image is a line naming it and where it is (a workspace file, ' +
    'or `output.results[i]` of the action)',
};

const RESPONSES_OUTPUT: SchemaObject = {
  description:
    'The text, or, when the answer attaches images, a list of `input_text` and `input_image` items (the image as a ' +
    '`data:` URL) in order',
  oneOf: [
    { type: 'string' },
    {
      type: 'array',
      minItems: 1,
      items: {
        oneOf: [
          closed(
            object(['type', 'text'], {
              type: { type: 'string', enum: ['input_text'] },
              text: { type: 'string', minLength: 1 },
            }),
          ),
          closed(
            object(['type', 'image_url'], {
              type: { type: 'string', enum: ['input_image'] },
              image_url: { type: 'string', pattern: '^data:image/(png|jpeg|gif|webp);base64,' },
            }),
          ),
        ],
      },
    },
  ],
};

const TOOL_RESULT: SchemaObject = closed(
  object(['tool_use_id', 'content', 'is_error'], RESULT, 'The answer to a `{id, name, input}` call'),
);

const ANTHROPIC_TOOL_RESULT: SchemaObject = closed(
  object(
    ['type', 'tool_use_id', 'content', 'is_error'],
    { type: { type: 'string', enum: ['tool_result'] }, ...RESULT },
    'The answer to a `tool_use` block: a `tool_result` content block, to put as is in the next user message',
  ),
);

const OPENAI_TOOL_RESULT: SchemaObject = closed(
  object(
    ['tool_use_id', 'tool_call_id', 'content', 'is_error', 'message'],
    {
      ...RESULT,
      content: TEXT_CONTENT,
      tool_call_id: { type: 'string' },
      message: closed(
        object(['role', 'tool_call_id', 'content'], {
          role: { type: 'string', enum: ['tool'] },
          tool_call_id: { type: 'string' },
          content: { type: 'string' },
        }),
      ),
    },
    'The answer to an OpenAI Chat Completions tool call. `message` is the `role: "tool"` message to append as is ' +
      'to `messages` (OpenAI refuses unknown fields in a message, so `is_error` stays outside it). A Chat ' +
      'Completions tool message takes text only: an image is a line naming it and where it is',
  ),
);

const RESPONSES_FUNCTION_CALL_OUTPUT: SchemaObject = closed(
  object(
    ['tool_use_id', 'call_id', 'content', 'is_error', 'item'],
    {
      ...RESULT,
      content: TEXT_CONTENT,
      call_id: { type: 'string' },
      item: closed(
        object(['type', 'call_id', 'output'], {
          type: { type: 'string', enum: ['function_call_output'] },
          call_id: { type: 'string' },
          output: RESPONSES_OUTPUT,
        }),
      ),
    },
    'The answer to a Responses API `function_call` item. `item` is the `function_call_output` to append as is to ' +
      'the next request’s `input`',
  ),
);

/**
 * One answer, in its call's shape. Listed most specific first: a client that tries each shape in turn (as
 * openapi-python-client's do) then reads an answer as the shape with the most of its fields, not as the plain
 * `{tool_use_id, content, is_error}` every answer also has.
 */
const TOOL_CALL_ANSWER_SCHEMA: SchemaObject = {
  description: 'The answer to one call, in the shape of the call',
  oneOf: [
    ref('ResponsesFunctionCallOutput'),
    ref('OpenAiToolResult'),
    ref('AnthropicToolResult'),
    ref('ToolResult'),
  ],
};

/**
 * The answer to `POST …/tool-calls`: one per call, in its call's shape; an array for an array of calls, in their
 * order.
 */
export const TOOL_CALL_ANSWER: SchemaObject = {
  oneOf: [ref('ToolCallAnswer'), { type: 'array', items: ref('ToolCallAnswer') }],
};

export const TOOL_SCHEMAS = {
  ToolList: TOOL_LIST_SCHEMA,
  AnthropicTool: ANTHROPIC_TOOL_SCHEMA,
  OpenAiTool: OPENAI_TOOL_SCHEMA,
  ResponsesTool: RESPONSES_TOOL_SCHEMA,
  ...TOOL_CALL_SCHEMAS,
  ToolCallAnswer: TOOL_CALL_ANSWER_SCHEMA,
  ToolResult: TOOL_RESULT,
  AnthropicToolResult: ANTHROPIC_TOOL_RESULT,
  OpenAiToolResult: OPENAI_TOOL_RESULT,
  ResponsesFunctionCallOutput: RESPONSES_FUNCTION_CALL_OUTPUT,
} satisfies Record<string, SchemaObject>;
