import type { CallToolResult, ImageContent, TextContent } from '@modelcontextprotocol/sdk/types.js';

/** `_meta` key naming the engine session a tool ran in (MCP reserves unprefixed keys). */
export const ENGINE_SESSION_META = 'switchyard/sessionId';

/** A file a browser action wrote in the workspace, as its result lists it (`output.artifacts`). */
export interface Artifact {
  path: string;
  mimeType: string;
}

/**
 * Image artifacts named by a browser tool's text answer. A browser result's text is its `output` as one line of
 * JSON, then `[hint]` sections (`toContent` in tools/tool-calls.service.ts); anything else names no artifact.
 */
export function imageArtifacts(content: string): Artifact[] {
  const firstLine = content.split('\n', 1)[0];
  let output: unknown;
  try {
    output = JSON.parse(firstLine);
  } catch {
    return [];
  }
  const artifacts = (output as { artifacts?: unknown } | null)?.artifacts;
  if (!Array.isArray(artifacts)) return [];
  return artifacts.filter(
    (a): a is Artifact =>
      typeof a === 'object' &&
      a !== null &&
      typeof (a as Artifact).path === 'string' &&
      typeof (a as Artifact).mimeType === 'string' &&
      (a as Artifact).mimeType.startsWith('image/'),
  );
}

/**
 * A tool-calls answer as an MCP tool result: the same text, the images the call saved, and the engine session in
 * `_meta`. `is_error` becomes `isError`: a failed call is a result the model reads, not a protocol error.
 */
export function toMcpResult(
  answer: { content: string; is_error: boolean },
  extra: (TextContent | ImageContent)[],
  engineSessionId: string,
): CallToolResult {
  return {
    content: [{ type: 'text', text: answer.content }, ...extra],
    isError: answer.is_error,
    _meta: { [ENGINE_SESSION_META]: engineSessionId },
  };
}

/** An error result for a call the engine could not take at all (its session gone). */
export function mcpErrorResult(message: string, engineSessionId: string): CallToolResult {
  return toMcpResult({ content: message, is_error: true }, [], engineSessionId);
}
