import * as fc from 'fast-check';
import { type ActionResult, InvalidInputError, NO_RISK, NotFoundError } from '@switchyard/common';
import { parseActionRequest } from '../actions/dto/action-body';
import type { ActionRequest } from '../../state/actions/action-request';
import type { ActionCompletion, ExecutionEngine, SubmittedAction } from '../actions/execution-engine.service';
import type { ApprovalRequest } from '@switchyard/context-graph';
import type { EngineConfig } from '../../platform/config/engine-config';
import { RequestValidationError } from '../../platform/validation/request-validation.error';
import type { Session } from '../../state/sessions/session.model';
import type { SessionsService } from '../../session/sessions/sessions.service';
import type { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import { policyServiceForTests } from '../../gates/policies/policy.testing';
import { skillsForTests } from '../skills/skill-registry.testing';
import { ToolCallsService } from './tool-calls.service';
import { ToolResultContent } from './tool-result-content.service';
import { ToolsService } from './tools.service';

/** The required fields of every tool, with values its validation accepts; a new tool fails the test until added. */
const REQUIRED: Record<string, Record<string, unknown>> = {
  bash: { command: 'echo hi' },
  python: { code: 'print(1)' },
  node: { code: 'console.log(1)' },
  read: { path: 'a.txt' },
  write: { path: 'a.txt', content: 'x' },
  edit: { path: 'a.txt', find: 'x', replace: 'y' },
  ls: {},
  find: { pattern: '*.txt' },
  grep: { pattern: 'x' },
  process_start: { command: 'cat' },
  process_list: {},
  process_logs: { processId: 'echo' },
  process_write: { processId: 'echo', data: 'x' },
  process_signal: { processId: 'echo', signal: 'HUP' },
  process_stop: { processId: 'echo' },
  process_wait: { processId: 'echo', timeoutMs: 1000 },
  kernel_restart: { language: 'python' },
  browser_navigate: { url: 'https://example.org/' },
  browser_click: { selector: '#go' },
  browser_fill: { selector: '#name', value: 'Ada' },
  browser_type: { selector: '#name', text: 'Ada' },
  browser_press: { key: 'Enter' },
  browser_select: { selector: '#color', values: ['blue'] },
  browser_hover: { selector: '#go' },
  browser_check: { selector: '#agree' },
  browser_wait_for: { selector: '#go' },
  browser_extract: { mode: 'text' },
  browser_screenshot: { path: 'shot.png' },
  browser_pdf: { path: 'page.pdf' },
  browser_download: { selector: '#get', path: 'downloads/' },
  browser_upload: { selector: '#file', path: 'shot.png' },
  browser_evaluate: { script: 'document.title' },
  browser_back: {},
  browser_forward: {},
  browser_reload: {},
  browser_new_tab: {},
  browser_switch_tab: { tabId: 'tab_1' },
  browser_close_tab: {},
};

/** Fields the tool-call path sets itself: a model never sent them, so no error may name them. */
const INTERNAL = ['type', 'op', 'language'];

const session = { id: 'ses_1', tenant: 'default' } as Session;

/** An engine that records each request and answers as `answer` says (a succeeded action by default). */
class RecordingEngine {
  readonly requests: ActionRequest[] = [];
  answer: (request: ActionRequest) => ActionCompletion = (request) => ({ result: succeeded(request) });

  approval?: ApprovalRequest;

  async submit(_session: Session, request: ActionRequest): Promise<Partial<SubmittedAction>> {
    this.requests.push(request);
    if (this.approval)
      return { id: 'act_1', approval: this.approval, completion: new Promise(() => undefined) };
    return { id: 'act_1', completion: Promise.resolve().then(() => this.answer(request)) };
  }
}

const succeeded = (request: ActionRequest): ActionResult => ({
  id: 'act_1',
  sessionId: session.id,
  type: request.type,
  status: 'succeeded',
  ...(request.type === 'code' ? { stdout: 'hi\n', exitCode: 0 } : { output: { ok: true } }),
  truncated: { stdout: false, stderr: false },
  durationMs: 1,
  startedAt: '2026-01-01T00:00:00.000Z',
  tier: 'subprocess',
  risk: NO_RISK,
});

function setup(): { service: ToolCallsService; engine: RecordingEngine; tools: ToolsService } {
  const config = {
    tools: { imageMaxBytes: 1000 },
    sandbox: { maxTimeoutMs: 300_000 },
  } as unknown as EngineConfig;
  const tools = new ToolsService(config, policyServiceForTests(), skillsForTests());
  const engine = new RecordingEngine();
  const sessions = {
    get: (tenant: string, id: string) => {
      if (id !== session.id) throw new NotFoundError(`session ${id} not found`, { sessionId: id });
      return session;
    },
  } as unknown as SessionsService;
  return {
    service: new ToolCallsService(
      tools,
      engine as unknown as ExecutionEngine,
      sessions,
      // No file is read here: the answers carry no image files.
      new ToolResultContent(config, {} as SessionWorkspaces),
    ),
    engine,
    tools,
  };
}

const openAi = (id: string, name: string, args: unknown) => ({
  id,
  type: 'function',
  function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
});

describe('ToolCallsService', () => {
  it('has a required input for every tool in the catalog', () => {
    expect(Object.keys(REQUIRED).sort()).toEqual(setup().tools.names().sort());
  });

  describe('null as absent (how strict-mode models leave out a field)', () => {
    const { tools } = setup();
    it.each(tools.names())(
      '%s: every optional field null, in each call shape, runs as if left out',
      async (name) => {
        const { service, engine } = setup();
        const tool = tools.find(name)!;
        const nulls = Object.fromEntries(
          tool.fields.filter((f) => !(f in REQUIRED[name])).map((f) => [f, null]),
        );
        const input = { ...REQUIRED[name], ...nulls };
        const answers = await service.run('default', session.id, [
          openAi('call_1', name, input),
          { type: 'tool_use', id: 'toolu_1', name, input },
          { id: 'plain_1', name, input },
        ]);
        for (const a of answers as { is_error: boolean; content: string }[]) {
          expect({ name, is_error: a.is_error, content: a.content }).toEqual({
            name,
            is_error: false,
            content: expect.any(String),
          });
        }
        // Exactly the request the required fields alone make: no null reached validation or the engine.
        const expected = parseActionRequest(tool.toAction(REQUIRED[name]));
        expect(engine.requests).toEqual([expected, expected, expected]);
        expect(JSON.stringify(engine.requests)).not.toContain('null');
      },
    );
  });

  describe("errors name the tool's own fields", () => {
    const { tools } = setup();
    it.each(tools.names().filter((n) => tools.find(n)!.fields.length > 0))(
      '%s: a wrong value in each field is an is_error result naming that field, and no internal one',
      async (name) => {
        const { service, engine } = setup();
        const tool = tools.find(name)!;
        const hidden = [...INTERNAL, ...Object.keys(tool.renames)].filter((f) => !tool.fields.includes(f));
        for (const field of tool.fields) {
          const input = { ...REQUIRED[name], [field]: [[]] };
          const answer = (await service.run('default', session.id, openAi('c', name, input))) as {
            content: string;
            is_error: boolean;
          };
          expect(answer.is_error).toBe(true);
          expect(answer.content.startsWith(`invalid input for ${name}: `)).toBe(true);
          // Problems are `; `-separated `<field>: <message>` (a field's own list starts `<field>[i]`).
          expect(answer.content).toMatch(new RegExp(`(: |; )${field}(: |\\[)`));
          for (const h of hidden) expect(answer.content).not.toMatch(new RegExp(`(^|: |; )${h}\\b`));
        }
        expect(engine.requests).toEqual([]);
      },
    );

    it('bash: validation messages say command, never code', async () => {
      const { service } = setup();
      const answer = await service.run('default', session.id, {
        id: 't',
        name: 'bash',
        input: { command: 5 },
      });
      expect(answer).toEqual({
        tool_use_id: 't',
        content: 'invalid input for bash: command: command must be a string',
        is_error: true,
      });
      const missing = await service.run('default', session.id, { id: 't', name: 'bash', input: {} });
      expect((missing as { content: string }).content).toBe(
        'invalid input for bash: command: command must be a string',
      );
    });

    it("bash: the engine's own refusals of the code say command too, before or while running", async () => {
      const { service, engine } = setup();
      engine.answer = () => {
        throw new InvalidInputError('code', 'code contains a NUL byte', 'INVALID_CODE');
      };
      const before = await service.run('default', session.id, {
        id: 'a',
        name: 'bash',
        input: { command: 'x' },
      });
      expect(before).toEqual({
        tool_use_id: 'a',
        content: 'command: command contains a NUL byte',
        is_error: true,
      });
      engine.answer = (request) => ({
        result: { ...succeeded(request), status: 'denied' },
        inputRefusal: new InvalidInputError('code', 'code is 10 bytes; at most 5', 'CODE_TOO_LARGE'),
      });
      const during = await service.run('default', session.id, {
        id: 'b',
        name: 'bash',
        input: { command: 'x' },
      });
      expect(during).toEqual({
        tool_use_id: 'b',
        content: 'command: command is 10 bytes; at most 5',
        is_error: true,
      });
      // python's field is code: it stays code.
      const py = await service.run('default', session.id, { id: 'c', name: 'python', input: { code: 'x' } });
      expect((py as { content: string }).content).toBe('code: code is 10 bytes; at most 5');
    });

    it('browser_wait_for: a rule on the op itself names no field the model did not send', async () => {
      const { service } = setup();
      const answer = await service.run('default', session.id, {
        id: 'w',
        name: 'browser_wait_for',
        input: {},
      });
      expect((answer as { content: string }).content).toBe(
        'invalid input for browser_wait_for: wait_for needs exactly one of selector, text, url, loadState',
      );
    });
  });

  describe('approvals', () => {
    it('answers a call a policy holds for approval at once, with a pending result naming the action', async () => {
      const { service, engine } = setup();
      engine.approval = {
        rule: '{"effect":"ask","match":{"risk":"high"}}',
        layer: 'session',
        reasons: ["python needs approval: the session policy's rule 1 asks for it"],
        requestedAt: '2026-01-01T00:00:00.000Z',
        expiresAt: '2026-01-01T00:15:00.000Z',
      };
      const answer = (await service.run('default', session.id, {
        id: 'p',
        name: 'python',
        input: { code: 'x' },
      })) as {
        content: string;
        is_error: boolean;
      };
      expect(answer.is_error).toBe(false);
      expect(answer.content).toMatch(/^\[pending approval\]\npython was not run yet/);
      expect(answer.content).toContain(`POST /v1/sessions/${session.id}/actions/act_1/approve`);
      expect(answer.content).toContain('2026-01-01T00:15:00.000Z');
      expect(answer.content).toContain("the session policy's rule 1 asks for it");
    });
  });

  describe('call shapes', () => {
    it('runs an OpenAI call with stringified arguments and answers with the role: tool message', async () => {
      const { service, engine } = setup();
      const answer = await service.run(
        'default',
        session.id,
        openAi('call_7', 'bash', { command: 'echo hi' }),
      );
      expect(engine.requests).toEqual([
        { type: 'code', language: 'bash', code: 'echo hi', state: 'session' },
      ]);
      const content = '[stdout]\nhi\n\n[exit_code]\n0';
      expect(answer).toEqual({
        tool_use_id: 'call_7',
        tool_call_id: 'call_7',
        content,
        is_error: false,
        message: { role: 'tool', tool_call_id: 'call_7', content },
      });
    });

    it('answers bad arguments as an is_error result naming arguments, without running anything', async () => {
      const { service, engine } = setup();
      const answer = (await service.run('default', session.id, openAi('c', 'bash', '{"command": "ls"'))) as {
        content: string;
        is_error: boolean;
        tool_call_id: string;
      };
      expect(answer.is_error).toBe(true);
      expect(answer.tool_call_id).toBe('c');
      expect(answer.content).toMatch(
        /^invalid arguments for bash: is malformed JSON: .+; arguments is a JSON object/,
      );
      expect(answer.content).toContain('bash: command, timeoutMs, state');
      // The tool is looked up first: an unknown one is said as such.
      const unknown = await service.run('default', session.id, openAi('d', 'rm_rf', 'nope'));
      expect((unknown as { content: string }).content).toMatch(/^unknown tool "rm_rf"/);
      expect(engine.requests).toEqual([]);
    });

    it('answers a tool_use block with a tool_result block', async () => {
      const { service } = setup();
      const answer = await service.run('default', session.id, {
        type: 'tool_use',
        id: 'toolu_1',
        name: 'ls',
        input: {},
      });
      expect(answer).toEqual({
        type: 'tool_result',
        tool_use_id: 'toolu_1',
        content: '{"ok":true}',
        is_error: false,
      });
    });

    it('runs a mixed array in order and answers each in its own shape, in that order', async () => {
      const { service, engine } = setup();
      const answers = (await service.run('default', session.id, [
        openAi('call_1', 'bash', { command: 'one' }),
        { type: 'tool_use', id: 'toolu_2', name: 'bash', input: { command: 'two' } },
        { id: 'plain_3', name: 'bash', input: { command: 'three' } },
        {
          type: 'function_call',
          id: 'fc_4',
          call_id: 'call_4',
          name: 'bash',
          arguments: '{"command":"four"}',
        },
        { id: 'bad_5', type: 'tool_call', name: 'bash' },
      ])) as unknown as Array<Record<string, unknown>>;
      expect(engine.requests.map((r) => (r as { code: string }).code)).toEqual([
        'one',
        'two',
        'three',
        'four',
      ]);
      expect(answers.map((a) => a.tool_use_id)).toEqual(['call_1', 'toolu_2', 'plain_3', 'call_4', 'bad_5']);
      expect(answers[0].message).toMatchObject({ role: 'tool', tool_call_id: 'call_1' });
      expect(answers[1].type).toBe('tool_result');
      expect(Object.keys(answers[2])).toEqual(['tool_use_id', 'content', 'is_error']);
      expect(answers[3].item).toEqual({
        type: 'function_call_output',
        call_id: 'call_4',
        output: '[stdout]\nhi\n\n[exit_code]\n0',
      });
      expect(answers[4]).toMatchObject({
        is_error: true,
        content: expect.stringMatching(/^type: must be "tool_use"/),
      });
    });

    it('passes env given as {name, value} pairs (the strict form) on as an object', async () => {
      const { service, engine } = setup();
      await service.run(
        'default',
        session.id,
        openAi('c', 'process_start', { command: 'cat', env: [{ name: 'A', value: '1' }], name: null }),
      );
      expect(engine.requests).toEqual([{ type: 'process', op: 'start', command: 'cat', env: { A: '1' } }]);
    });

    it('answers a read of a PNG as an image where the API takes one, else a line naming it', async () => {
      const { service, engine } = setup();
      const png = Buffer.concat([Buffer.from('89504e470d0a1a0a', 'hex'), Buffer.alloc(24)]).toString(
        'base64',
      );
      engine.answer = (request) => ({
        result: {
          ...succeeded(request),
          output: { path: 'p.png', encoding: 'base64', content: png, size: 32, truncated: false },
        },
      });
      const input = { path: 'p.png' };
      const [plain, anthropic, chat, responses] = (await service.run('default', session.id, [
        { id: 'a', name: 'read', input },
        { type: 'tool_use', id: 'b', name: 'read', input },
        openAi('c', 'read', input),
        { type: 'function_call', call_id: 'd', name: 'read', arguments: JSON.stringify(input) },
      ])) as unknown as Array<Record<string, any>>;
      const blocks = [
        { type: 'text', text: '[image]\np.png: image/png, 32 B' },
        { type: 'image', source: { type: 'base64', media_type: 'image/png', data: png } },
      ];
      expect(plain.content).toEqual(blocks);
      expect(anthropic).toEqual({ type: 'tool_result', tool_use_id: 'b', content: blocks, is_error: false });
      expect(chat.message.content).toBe(
        '[image]\np.png: image/png, 32 B; not shown (this tool result takes text only): it is the workspace file p.png',
      );
      expect(responses.item.output).toEqual([
        { type: 'input_text', text: '[image]\np.png: image/png, 32 B' },
        { type: 'input_image', image_url: `data:image/png;base64,${png}` },
      ]);
      // MCP's way in: the outcome itself.
      const outcome = await service.outcome('default', session.id, 'read', input);
      expect(outcome.parts).toEqual([expect.objectContaining({ type: 'image', data: png })]);
    });

    it('answers any call with an id, whatever its shape and content, with a result; never throws', async () => {
      const { service, tools } = setup();
      const name = fc.oneof(fc.constantFrom(...tools.names()), fc.jsonValue({ maxDepth: 1 }));
      const input = fc.oneof(
        fc.jsonValue({ maxDepth: 3 }),
        fc.dictionary(fc.string(), fc.jsonValue({ maxDepth: 2 })),
      );
      const args = fc.oneof(
        input,
        input.map((v) => JSON.stringify(v)),
        fc.string(),
      );
      const type = fc.option(
        fc.oneof(fc.constantFrom('tool_use', 'function', 'function_call'), fc.jsonValue({ maxDepth: 1 })),
        {
          nil: undefined,
        },
      );
      const call = fc.oneof(
        fc.record({ id: fc.constant('c'), type, name, input }, { requiredKeys: ['id'] }),
        fc.record(
          { id: fc.constant('c'), call_id: fc.jsonValue({ maxDepth: 0 }), type, name, arguments: args },
          { requiredKeys: ['id'] },
        ),
        fc.record(
          {
            id: fc.constant('c'),
            type,
            function: fc.oneof(
              fc.record({ name, arguments: args }, { requiredKeys: [] }),
              fc.jsonValue({ maxDepth: 1 }),
            ),
          },
          { requiredKeys: ['id'] },
        ),
      );
      await fc.assert(
        fc.asyncProperty(call, async (c) => {
          const answer = (await service.run('default', session.id, c)) as {
            content: unknown;
            is_error: unknown;
          };
          expect(typeof answer.content).toBe('string');
          expect(typeof answer.is_error).toBe('boolean');
        }),
        { numRuns: 500, seed: 42 },
      );
    });

    it('is a 400 naming the call without an id, before any call runs', async () => {
      const { service, engine } = setup();
      const run = service.run('default', session.id, [
        openAi('call_1', 'bash', { command: 'one' }),
        { type: 'function', function: { name: 'bash', arguments: '{}' } },
      ]);
      await expect(run).rejects.toBeInstanceOf(RequestValidationError);
      await expect(run).rejects.toMatchObject({ problems: [{ field: '[1].id' }] });
      expect(engine.requests).toEqual([]);
    });
  });
});
