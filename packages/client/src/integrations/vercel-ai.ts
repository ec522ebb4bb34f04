import { jsonSchema, tool, type ToolSet } from 'ai';
import type { SwitchyardClient } from '../client';
import type { Sandbox } from '../sandbox';
import type { ToolCallAnswer } from '../types';

/** The session whose tools to offer: a `Sandbox`, or a client and a session id. */
export type ToolSource = Sandbox | { client: SwitchyardClient; sessionId: string };

/** A tool's answer as the engine gives it for a model: text, or text and image blocks. */
export type ToolContent = Extract<ToolCallAnswer, { content: unknown }>['content'];

/** One entry of `GET /v1/tools?format=openai`: `{type: 'function', function: {name, description, parameters}}`. */
interface OpenAiFunction {
  name: string;
  description?: string;
  parameters: Record<string, unknown>;
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

function functionOf(entry: Record<string, unknown>): OpenAiFunction {
  const fn = entry.function;
  if (!isRecord(fn) || typeof fn.name !== 'string' || !isRecord(fn.parameters))
    throw new Error(`GET /v1/tools answered a tool that is not an OpenAI function: ${JSON.stringify(entry)}`);
  return {
    name: fn.name,
    parameters: fn.parameters,
    ...(typeof fn.description === 'string' && { description: fn.description }),
  };
}

/**
 * The session's tools (`GET /v1/tools?sessionId=…&format=openai`: what its policy offers, its skills included) as a
 * Vercel AI SDK tool set for `generateText({tools})`/`streamText`. Each `execute` runs the call in the session
 * (`POST …/tool-calls`, the model's tool call id as the call's id) and answers the engine's text for the model; a
 * call the engine answers `is_error` (bad input, a non-zero exit, a refusal) throws an `Error` with that text, which
 * the SDK hands back to the model as the tool's error.
 */
export async function vercelAiTools(
  source: ToolSource,
  options: { strict?: boolean } = {},
): Promise<ToolSet> {
  const { client, sessionId } =
    'sessionId' in source ? source : { client: source.client, sessionId: source.id };
  const catalog = await client.tools.list({ format: 'openai', sessionId, strict: options.strict });
  const tools: ToolSet = {};
  for (const entry of catalog) {
    const fn = functionOf(entry);
    tools[fn.name] = tool({
      ...(fn.description !== undefined && { description: fn.description }),
      inputSchema: jsonSchema<Record<string, unknown>>(fn.parameters),
      execute: async (input, { toolCallId, abortSignal }): Promise<ToolContent> => {
        abortSignal?.throwIfAborted();
        const answer = await client.tools.call(sessionId, { id: toolCallId, name: fn.name, input });
        if (Array.isArray(answer) || !('content' in answer))
          throw new Error(`POST tool-calls answered ${JSON.stringify(answer).slice(0, 200)}`);
        if (answer.is_error)
          throw new Error(
            typeof answer.content === 'string' ? answer.content : JSON.stringify(answer.content),
          );
        return answer.content;
      },
    });
  }
  return tools;
}
