import { Logger } from '@nestjs/common';
import { NotFoundError } from '@switchyard/common';
import type { ImageContent } from '@modelcontextprotocol/sdk/types.js';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { ToolCallsService } from '../../engine/tools/tool-calls.service';
import { ToolsService } from '../../engine/tools/tools.service';
import type { McpImages } from './mcp-images.service';
import type { Artifact } from './mcp-tool-result';
import { policyServiceForTests } from '../../gates/policies/policy.testing';
import { skillsForTests } from '../../engine/skills/skill-registry.testing';
import type { SessionsService } from '../../session/sessions/sessions.service';
import { McpToolCalls } from './mcp-tool-calls.service';

/** Tool calls answered from a script, recorded. */
class FakeToolCalls {
  readonly calls: { tenant: string; sessionId: string; body: unknown }[] = [];
  constructor(private readonly answer: (name: string) => { content: string; is_error: boolean } | Error) {}

  run(tenant: string, sessionId: string, body: { id: string; name: string }): Promise<unknown> {
    this.calls.push({ tenant, sessionId, body });
    const a = this.answer(body.name);
    return a instanceof Error ? Promise.reject(a) : Promise.resolve({ tool_use_id: body.id, ...a });
  }
}

class FakeImages {
  readonly asked: Artifact[][] = [];
  read(_tenant: string, _session: string, artifacts: Artifact[]): Promise<ImageContent[]> {
    this.asked.push(artifacts);
    return Promise.resolve(
      artifacts.map((a) => ({ type: 'image', data: `data:${a.path}`, mimeType: a.mimeType })),
    );
  }
}

const tools = new ToolsService(
  { tools: {}, sandbox: { maxTimeoutMs: 300_000 } } as unknown as EngineConfig,
  policyServiceForTests(),
  skillsForTests(),
);
const sessions = { find: () => undefined } as unknown as SessionsService;
const shotText = JSON.stringify({ artifacts: [{ path: 's.png', bytes: 3, mimeType: 'image/png' }] });

function build(answer: (name: string) => { content: string; is_error: boolean } | Error) {
  const calls = new FakeToolCalls(answer);
  const images = new FakeImages();
  const mcp = new McpToolCalls(
    tools,
    calls as unknown as ToolCallsService,
    images as unknown as McpImages,
    sessions,
  );
  return { mcp, calls, images };
}

// Logs of opened, closed and failed sessions are the code's business, not the test output's.
beforeAll(() => Logger.overrideLogger(false));

describe('McpToolCalls', () => {
  it('lists the Anthropic-format catalog with input_schema as inputSchema', () => {
    const { mcp } = build(() => ({ content: '', is_error: false }));
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
    const { mcp, calls, images } = build(() => ({ content: '[stdout]\nhi', is_error: false }));
    const result = await mcp.call('t', 'ses_1', 'bash', { command: 'echo hi' });
    expect(calls.calls).toEqual([
      {
        tenant: 't',
        sessionId: 'ses_1',
        body: { id: expect.stringMatching(/^mcp_\d+$/), name: 'bash', input: { command: 'echo hi' } },
      },
    ]);
    expect(result).toEqual({
      content: [{ type: 'text', text: '[stdout]\nhi' }],
      isError: false,
      _meta: { 'switchyard/sessionId': 'ses_1' },
    });
    expect(images.asked).toEqual([]);
  });

  it("attaches a browser tool's image artifacts, and only when the call succeeded", async () => {
    const ok = build(() => ({ content: shotText, is_error: false }));
    const shot = await ok.mcp.call('t', 'ses_1', 'browser_screenshot', { path: 's.png' });
    expect(shot.content).toEqual([
      { type: 'text', text: shotText },
      { type: 'image', data: 'data:s.png', mimeType: 'image/png' },
    ]);
    const failed = build(() => ({ content: shotText, is_error: true }));
    expect((await failed.mcp.call('t', 'ses_1', 'browser_screenshot', {})).content).toHaveLength(1);
    expect(failed.images.asked).toEqual([]);
    // Not a browser tool: its text is never read for artifacts.
    const bash = build(() => ({ content: shotText, is_error: false }));
    expect((await bash.mcp.call('t', 'ses_1', 'bash', { command: 'x' })).content).toHaveLength(1);
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
