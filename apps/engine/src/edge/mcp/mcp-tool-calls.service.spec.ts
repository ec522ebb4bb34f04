import { Logger } from '@nestjs/common';
import { NotFoundError } from '@switchyard/common';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { ToolCallsService } from '../../engine/tools/tool-calls.service';
import { textOutcome, type ToolOutcome } from '../../engine/tools/tool-outcome';
import { ToolsService } from '../../engine/tools/tools.service';
import { policyServiceForTests } from '../../gates/policies/policy.testing';
import { skillsForTests } from '../../engine/skills/skill-registry.testing';
import type { SessionsService } from '../../session/sessions/sessions.service';
import { McpToolCalls } from './mcp-tool-calls.service';

/** Tool calls answered from a script, recorded. */
class FakeToolCalls {
  readonly calls: { tenant: string; sessionId: string; name: unknown; input: unknown }[] = [];
  constructor(private readonly answer: (name: string) => ToolOutcome | Error) {}

  outcome(tenant: string, sessionId: string, name: string, input: unknown): Promise<ToolOutcome> {
    this.calls.push({ tenant, sessionId, name, input });
    const a = this.answer(name);
    return a instanceof Error ? Promise.reject(a) : Promise.resolve(a);
  }
}

const tools = new ToolsService(
  { tools: {}, sandbox: { maxTimeoutMs: 300_000 } } as unknown as EngineConfig,
  policyServiceForTests(),
  skillsForTests(),
);
const sessions = { find: () => undefined } as unknown as SessionsService;

function build(answer: (name: string) => ToolOutcome | Error) {
  const calls = new FakeToolCalls(answer);
  const mcp = new McpToolCalls(tools, calls as unknown as ToolCallsService, sessions);
  return { mcp, calls };
}

// Logs of opened, closed and failed sessions are the code's business, not the test output's.
beforeAll(() => Logger.overrideLogger(false));

describe('McpToolCalls', () => {
  it('lists the Anthropic-format catalog with input_schema as inputSchema', () => {
    const { mcp } = build(() => textOutcome('', false));
    const anthropic = tools.list('anthropic') as {
      name: string;
      description: string;
      input_schema: unknown;
    }[];
    expect(mcp.list('open', 'ses_x')).toEqual(
      anthropic.map((t) => ({ name: t.name, description: t.description, inputSchema: t.input_schema })),
    );
  });

  it('runs a call through the tool-calls service in the engine session and keeps its text', async () => {
    const { mcp, calls } = build(() => textOutcome('[stdout]\nhi', false));
    const result = await mcp.call('t', 'ses_1', 'bash', { command: 'echo hi' });
    expect(calls.calls).toEqual([
      { tenant: 't', sessionId: 'ses_1', name: 'bash', input: { command: 'echo hi' } },
    ]);
    expect(result).toEqual({
      content: [{ type: 'text', text: '[stdout]\nhi' }],
      isError: false,
      _meta: { 'switchyard/sessionId': 'ses_1' },
    });
  });

  it("answers the outcome's images as image content", async () => {
    const image = {
      type: 'image' as const,
      text: '[image]\ns.png: image/png, 3 B',
      mimeType: 'image/png' as const,
      data: 'iVBO',
      where: 'the workspace file s.png',
    };
    const { mcp } = build(() => ({ parts: [{ type: 'text', text: '{}' }, image], is_error: false }));
    expect((await mcp.call('t', 'ses_1', 'browser_screenshot', { path: 's.png' })).content).toEqual([
      { type: 'text', text: '{}\n[image]\ns.png: image/png, 3 B' },
      { type: 'image', data: 'iVBO', mimeType: 'image/png' },
    ]);
  });

  it('answers an ended engine session as an isError result, and lets other failures through', async () => {
    const gone = build(() => new NotFoundError('session ses_1 not found'));
    const result = await gone.mcp.call('t', 'ses_1', 'bash', { command: 'x' });
    expect(result.isError).toBe(true);
    expect(result.content).toEqual([{ type: 'text', text: expect.stringContaining('ses_1 has ended') }]);
    const broken = build(() => new Error('bug'));
    await expect(broken.mcp.call('t', 'ses_1', 'bash', { command: 'x' })).rejects.toThrow('bug');
  });
});
