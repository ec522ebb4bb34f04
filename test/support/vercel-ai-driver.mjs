// Drives the Vercel AI SDK adapter (`@switchyard/client/ai`) through the real `ai` package with a scripted model (no
// model is called): `generateText` gets the session's tools, the mock model asks for the tool calls given as JSON in
// argv[3], and the SDK runs each through the tool's `execute`, as it would for a real model. Prints, as JSON, the
// tool names, what each call answered (output or error), and the tool's input schema the SDK would send to a model.
// Usage: SWITCHYARD_URL=… node vercel-ai-driver.mjs SESSION_ID '[{"toolName":"bash","input":{"command":"…"}}]'
import { SwitchyardClient } from '@switchyard/client';
import { vercelAiTools } from '@switchyard/client/ai';
import { generateText, isStepCount } from 'ai';
import { MockLanguageModelV4 } from 'ai/test';

const [sessionId, callsJson] = process.argv.slice(2);
const calls = JSON.parse(callsJson);
const usage = {
  inputTokens: { total: 1, noCache: 1, cacheRead: 0, cacheWrite: 0 },
  outputTokens: { total: 1, text: 1, reasoning: 0 },
};
const client = new SwitchyardClient();
const tools = await vercelAiTools({ client, sessionId });
const model = new MockLanguageModelV4({
  doGenerate: [
    {
      content: calls.map((c, i) => ({
        type: 'tool-call',
        toolCallId: `call_${i + 1}`,
        toolName: c.toolName,
        input: JSON.stringify(c.input),
      })),
      finishReason: { unified: 'tool-calls', raw: 'tool_calls' },
      usage,
      warnings: [],
    },
    {
      content: [{ type: 'text', text: 'done' }],
      finishReason: { unified: 'stop', raw: 'stop' },
      usage,
      warnings: [],
    },
  ],
});
const result = await generateText({ model, tools, prompt: 'use the tools', stopWhen: isStepCount(2) });
const first = result.steps[0];
const answers = first.content
  .filter((part) => part.type === 'tool-result' || part.type === 'tool-error')
  .map((part) => ({
    toolCallId: part.toolCallId,
    type: part.type,
    ...(part.type === 'tool-result'
      ? { output: part.output }
      : { error: String(part.error?.message ?? part.error) }),
  }));
const sent = model.doGenerateCalls[0].tools.find((t) => t.name === 'bash');
process.stdout.write(
  `${JSON.stringify({ names: Object.keys(tools).sort(), answers, text: result.text, bash: sent })}\n`,
);
