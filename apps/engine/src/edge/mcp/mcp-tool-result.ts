import type { CallToolResult, ImageContent, TextContent } from '@modelcontextprotocol/sdk/types.js';
import { blocksOf, hasImages, textOf, textOutcome, type ToolOutcome } from '../../engine/tools/tool-outcome';

/** `_meta` key naming the engine session a tool ran in (MCP reserves unprefixed keys). */
export const ENGINE_SESSION_META = 'switchyard/sessionId';

/** The outcome's text and images as MCP content: one text block, or text and `image` blocks in order. */
function mcpContent(outcome: ToolOutcome): (TextContent | ImageContent)[] {
  if (!hasImages(outcome)) return [{ type: 'text', text: textOf(outcome) }];
  return blocksOf(outcome).map((b) =>
    b.type === 'text'
      ? { type: 'text', text: b.text }
      : { type: 'image', data: b.data, mimeType: b.mimeType },
  );
}

/**
 * A tool call's outcome as an MCP tool result: the text the tool-calls API answers, its images as `image` blocks,
 * and the engine session in `_meta`. `is_error` becomes `isError`: a failed call is a result the model reads, not a
 * protocol error.
 */
export function toMcpResult(outcome: ToolOutcome, engineSessionId: string): CallToolResult {
  return {
    content: mcpContent(outcome),
    isError: outcome.is_error,
    _meta: { [ENGINE_SESSION_META]: engineSessionId },
  };
}

/** An error result for a call the engine could not take at all (its session gone). */
export function mcpErrorResult(message: string, engineSessionId: string): CallToolResult {
  return toMcpResult(textOutcome(message, true), engineSessionId);
}
