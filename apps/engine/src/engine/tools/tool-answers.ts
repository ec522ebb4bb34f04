import type { ToolCall } from './tool-call-formats';
import type { ModelImageType } from './tool-images';
import { blocksOf, hasImages, type ToolOutcome, textOf } from './tool-outcome';

/** Anthropic's content blocks a `tool_result` takes: text, and base64 images. */
export type AnthropicBlock =
  | { type: 'text'; text: string }
  | { type: 'image'; source: { type: 'base64'; media_type: ModelImageType; data: string } };

/**
 * The `tool_result` a plain `{id, name, input}` call gets (the answer's original shape). `content` is the text, or,
 * when the answer attaches images, Anthropic's list of text and image blocks.
 */
export interface ToolResult {
  tool_use_id: string;
  content: string | AnthropicBlock[];
  is_error: boolean;
}

/** Anthropic: a `tool_result` content block, to put as is in the next user message. */
export interface AnthropicToolResult extends ToolResult {
  type: 'tool_result';
}

/**
 * OpenAI Chat Completions: the result with the call's id under both names, and `message`, to append as is to
 * `messages`. A tool message takes text only: an image is named there, with where it is.
 */
export interface OpenAiToolResult {
  tool_use_id: string;
  tool_call_id: string;
  content: string;
  is_error: boolean;
  message: { role: 'tool'; tool_call_id: string; content: string };
}

/** A Responses API `function_call_output`'s output item: text, or an image as a data URL. */
export type ResponsesOutputItem =
  { type: 'input_text'; text: string } | { type: 'input_image'; image_url: string };

/**
 * OpenAI Responses API: `item` is the `function_call_output` to append as is to `input`; its `output` is the text,
 * or a list of `input_text` and `input_image` items when the answer attaches images. `content` is the answer as
 * text (images named), as the other shapes have it.
 */
export interface ResponsesToolResult {
  tool_use_id: string;
  call_id: string;
  content: string;
  is_error: boolean;
  item: { type: 'function_call_output'; call_id: string; output: string | ResponsesOutputItem[] };
}

export type ToolAnswer = ToolResult | AnthropicToolResult | OpenAiToolResult | ResponsesToolResult;

function anthropicContent(outcome: ToolOutcome): string | AnthropicBlock[] {
  if (!hasImages(outcome)) return textOf(outcome);
  return blocksOf(outcome).map((b) =>
    b.type === 'text'
      ? { type: 'text', text: b.text }
      : { type: 'image', source: { type: 'base64', media_type: b.mimeType, data: b.data } },
  );
}

function responsesOutput(outcome: ToolOutcome): string | ResponsesOutputItem[] {
  if (!hasImages(outcome)) return textOf(outcome);
  return blocksOf(outcome).map((b) =>
    b.type === 'text'
      ? { type: 'input_text', text: b.text }
      : { type: 'input_image', image_url: `data:${b.mimeType};base64,${b.data}` },
  );
}

/** The outcome in the shape of the call's API. */
export function answerFor(call: Pick<ToolCall, 'id' | 'format'>, outcome: ToolOutcome): ToolAnswer {
  const { is_error } = outcome;
  switch (call.format) {
    case 'plain':
      return { tool_use_id: call.id, content: anthropicContent(outcome), is_error };
    case 'anthropic':
      return { type: 'tool_result', tool_use_id: call.id, content: anthropicContent(outcome), is_error };
    case 'openai': {
      const content = textOf(outcome);
      return {
        tool_use_id: call.id,
        tool_call_id: call.id,
        content,
        is_error,
        message: { role: 'tool', tool_call_id: call.id, content },
      };
    }
    case 'responses':
      return {
        tool_use_id: call.id,
        call_id: call.id,
        content: textOf(outcome),
        is_error,
        item: { type: 'function_call_output', call_id: call.id, output: responsesOutput(outcome) },
      };
  }
}
