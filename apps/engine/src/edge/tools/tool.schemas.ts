import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { FREE_OBJECT, object, ref } from '../http/common.schemas';

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

const TOOL_LIST_SCHEMA: SchemaObject = object(['tools'], {
  tools: {
    // anyOf, not oneOf: an empty list (a policy that leaves no tool) is a list of either format.
    description: 'Every tool the caller’s policy offers, in the format asked for',
    anyOf: [
      { type: 'array', items: ref('AnthropicTool'), title: 'format=anthropic' },
      { type: 'array', items: ref('OpenAiTool'), title: 'format=openai' },
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

const ANSWER: SchemaObject = {
  oneOf: [
    {
      title: 'Tool result (for a {id, name, input} call)',
      ...closed(object(['tool_use_id', 'content', 'is_error'], RESULT)),
    },
    {
      title: 'Anthropic tool_result block (for a tool_use block)',
      ...closed(
        object(
          ['type', 'tool_use_id', 'content', 'is_error'],
          { type: { type: 'string', enum: ['tool_result'] }, ...RESULT },
          'A `tool_result` content block, to put as is in the next user message',
        ),
      ),
    },
    {
      title: 'OpenAI tool result (for an OpenAI tool call)',
      ...closed(
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
          '`message` is the `role: "tool"` message to append as is to `messages` (OpenAI refuses unknown fields in ' +
            'a message, so `is_error` stays outside it). A Chat Completions tool message takes text only: an image ' +
            'is a line naming it and where it is',
        ),
      ),
    },
    {
      title: 'OpenAI Responses function_call_output (for a function_call item)',
      ...closed(
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
          '`item` is the `function_call_output` to append as is to the next request’s `input`',
        ),
      ),
    },
  ],
};

/**
 * The answer to `POST …/tool-calls`: one per call, in its call's shape; an array for an array of calls, in their
 * order. Inline in the operation rather than registered: tool-formats.e2e-spec.ts reads its variants there.
 */
export const TOOL_CALL_ANSWER: SchemaObject = { oneOf: [ANSWER, { type: 'array', items: ANSWER }] };

export const TOOL_SCHEMAS = {
  ToolList: TOOL_LIST_SCHEMA,
  AnthropicTool: ANTHROPIC_TOOL_SCHEMA,
  OpenAiTool: OPENAI_TOOL_SCHEMA,
} satisfies Record<string, SchemaObject>;
