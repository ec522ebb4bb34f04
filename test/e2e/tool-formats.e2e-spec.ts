import Ajv from 'ajv';
import { EngineHarness } from '../support/engine-harness';
import { strictModeViolations } from '../support/openai-strict-rules';
import { MINIMAL_INPUTS, TOOL_ORDER } from '../support/tool-inputs';
import { fieldsOf } from '../support/error-body';

interface OpenAiTool {
  type: string;
  function: { name: string; description: string; parameters: any; strict?: boolean };
}

/** An OpenAI Chat Completions tool call, `arguments` as the model writes it: a string of JSON. */
const openAiCall = (id: string, name: string, args: Record<string, unknown> | string) => ({
  id,
  type: 'function',
  function: { name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
});

describe('tools in every model format', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '0' });
  });
  afterAll(() => engine?.stop());

  const call = (sid: string, body: unknown) => engine.request('POST', `/v1/sessions/${sid}/tool-calls`, body);
  const strictTools = async (): Promise<OpenAiTool[]> => {
    const res = await engine.request('GET', '/v1/tools?format=openai&strict=true');
    expect(res.status).toBe(200);
    return res.body.tools;
  };

  it('lists OpenAI strict-mode tools: strict: true, every schema keeping every strict rule', async () => {
    const strict = await strictTools();
    const plain: OpenAiTool[] = (await engine.request('GET', '/v1/tools?format=openai')).body.tools;
    expect(strict.map((t) => t.function.name)).toEqual(plain.map((t) => t.function.name));
    const ajv = new Ajv({ strict: false });
    for (const t of strict) {
      expect(t.type).toBe('function');
      expect(t.function.strict).toBe(true);
      expect(ajv.validateSchema(t.function.parameters)).toBe(true);
      expect({ tool: t.function.name, violations: strictModeViolations(t.function.parameters) }).toEqual({
        tool: t.function.name,
        violations: [],
      });
    }
    // strict=false is the plain list, unchanged.
    expect((await engine.request('GET', '/v1/tools?format=openai&strict=false')).body.tools).toEqual(plain);
    expect(plain.every((t) => t.function.strict === undefined)).toBe(true);
  });

  it('lists flat Responses API function tools, strict unless strict=false, as the Responses API reads them', async () => {
    const chat: OpenAiTool[] = (await engine.request('GET', '/v1/tools?format=openai&strict=true')).body
      .tools;
    const plain: OpenAiTool[] = (await engine.request('GET', '/v1/tools?format=openai')).body.tools;
    const byDefault = await engine.request('GET', '/v1/tools?format=openai-responses');
    expect(byDefault.status).toBe(200);
    // The Chat Completions functions, one level up; strict always said (the Responses API reads none as true).
    expect(byDefault.body.tools).toEqual(chat.map((t) => ({ type: 'function', ...t.function })));
    expect((await engine.request('GET', '/v1/tools?format=openai-responses&strict=true')).body).toEqual(
      byDefault.body,
    );
    const loose = (await engine.request('GET', '/v1/tools?format=openai-responses&strict=false')).body.tools;
    expect(loose).toEqual(plain.map((t) => ({ type: 'function', ...t.function, strict: false })));
    for (const t of byDefault.body.tools) {
      expect(Object.keys(t)).toEqual(['type', 'name', 'description', 'parameters', 'strict']);
      expect({ tool: t.name, strict: t.strict, violations: strictModeViolations(t.parameters) }).toEqual({
        tool: t.name,
        strict: true,
        violations: [],
      });
    }
    const bad = await engine.request('GET', '/v1/tools?format=openai_responses');
    expect({ status: bad.status, fields: fieldsOf(bad.body) }).toEqual({ status: 400, fields: ['format'] });
  });

  it('runs the Responses API loop: a listed tool, its function_call item, the function_call_output to send back', async () => {
    const sid = await engine.createSession();
    const tools = (await engine.request('GET', `/v1/tools?format=openai-responses&sessionId=${sid}`)).body
      .tools;
    const bash = tools.find((t: { name: string }) => t.name === 'bash');
    // What a strict-mode model writes: every field of the schema, null for those it leaves out.
    const args = {
      ...Object.fromEntries(Object.keys(bash.parameters.properties).map((k) => [k, null])),
      command: 'echo "$((6 * 7))"',
    };
    expect(new Ajv({ strict: false }).validate(bash.parameters, args)).toBe(true);
    const item = {
      type: 'function_call',
      id: 'fc_loop',
      call_id: 'call_loop',
      name: bash.name,
      arguments: JSON.stringify(args),
      status: 'completed',
    };
    const res = await call(sid, [item]);
    expect(res.status).toBe(200);
    const content = '[stdout]\n42\n\n[exit_code]\n0';
    // The next request's `input`: the model's item, then the engine's, as they are.
    const input = [item, res.body[0].item];
    expect(input[1]).toEqual({ type: 'function_call_output', call_id: 'call_loop', output: content });
    expect(res.body[0]).toMatchObject({ call_id: 'call_loop', is_error: false });
  });

  it('refuses a strict that is not true or false, and strict=true for Anthropic, naming strict', async () => {
    for (const query of [
      'format=openai&strict=yes',
      'format=openai&strict=',
      'format=openai&strict=true&strict=true',
      'format=anthropic&strict=true',
      'strict=true',
    ]) {
      const res = await engine.request('GET', `/v1/tools?${query}`);
      expect({ query, status: res.status, fields: fieldsOf(res.body) }).toEqual({
        query,
        status: 400,
        fields: ['strict'],
      });
    }
    expect((await engine.request('GET', '/v1/tools?format=anthropic&strict=false')).status).toBe(200);
  });

  it('runs bash from an OpenAI tool call (stringified arguments) and answers the role: tool message', async () => {
    const sid = await engine.createSession();
    const res = await call(sid, openAiCall('call_1', 'bash', { command: 'echo hello' }));
    expect(res.status).toBe(200);
    const content = '[stdout]\nhello\n\n[exit_code]\n0';
    expect(res.body).toEqual({
      tool_use_id: 'call_1',
      tool_call_id: 'call_1',
      content,
      is_error: false,
      message: { role: 'tool', tool_call_id: 'call_1', content },
    });
  });

  it('runs an OpenAI Responses function_call item as it comes and answers its function_call_output', async () => {
    const sid = await engine.createSession();
    const res = await call(sid, {
      type: 'function_call',
      id: 'fc_1',
      call_id: 'call_r1',
      name: 'bash',
      arguments: '{"command":"echo resp"}',
      status: 'completed',
    });
    expect(res.status).toBe(200);
    const content = '[stdout]\nresp\n\n[exit_code]\n0';
    expect(res.body).toEqual({
      tool_use_id: 'call_r1',
      call_id: 'call_r1',
      content,
      is_error: false,
      item: { type: 'function_call_output', call_id: 'call_r1', output: content },
    });
    // Without a call_id there is no call to answer: its id answers, as an error naming call_id.
    const bare = await call(sid, { type: 'function_call', id: 'fc_2', name: 'bash', arguments: '{}' });
    expect(bare.body).toMatchObject({ call_id: 'fc_2', is_error: true });
    expect(bare.body.content).toMatch(/^call_id: /);
    const neither = await call(sid, [{ type: 'function_call', name: 'bash' }]);
    expect({ status: neither.status, fields: fieldsOf(neither.body) }).toEqual({
      status: 400,
      fields: ['[0].call_id'],
    });
  });

  it('runs an Anthropic tool_use block as it comes and answers a tool_result block', async () => {
    const sid = await engine.createSession();
    const res = await call(sid, {
      type: 'tool_use',
      id: 'toolu_1',
      name: 'bash',
      input: { command: 'echo hey' },
    });
    expect(res.status).toBe(200);
    expect(res.body).toEqual({
      type: 'tool_result',
      tool_use_id: 'toolu_1',
      content: '[stdout]\nhey\n\n[exit_code]\n0',
      is_error: false,
    });
  });

  it('answers arguments that are not JSON as an is_error result naming arguments; a mixed batch keeps order', async () => {
    const sid = await engine.createSession();
    const res = await call(sid, [
      openAiCall('call_bad', 'bash', '{"command": "echo never'),
      { type: 'tool_use', id: 'toolu_2', name: 'bash', input: { command: 'echo two' } },
      { id: 'plain_3', name: 'bash', input: { command: 'echo three' } },
      openAiCall('call_4', 'bash', { command: 'echo four' }),
    ]);
    expect(res.status).toBe(200);
    const [bad, two, three, four] = res.body;
    expect(bad).toMatchObject({ tool_use_id: 'call_bad', tool_call_id: 'call_bad', is_error: true });
    expect(bad.content).toMatch(
      /^invalid arguments for bash: is malformed JSON: .+; arguments is a JSON object/,
    );
    expect(bad.message).toEqual({ role: 'tool', tool_call_id: 'call_bad', content: bad.content });
    expect(two).toMatchObject({ type: 'tool_result', tool_use_id: 'toolu_2', is_error: false });
    expect(two.content).toContain('two');
    expect(three).toEqual({
      tool_use_id: 'plain_3',
      content: expect.stringContaining('three'),
      is_error: false,
    });
    expect(four).toMatchObject({ tool_call_id: 'call_4', is_error: false });
    expect(four.content).toContain('four');
  });

  it('runs every non-browser tool from a strict-mode call: every optional field null', async () => {
    const schemas = new Map((await strictTools()).map((t) => [t.function.name, t.function.parameters]));
    const ajv = new Ajv({ strict: false });
    const sid = await engine.createSession();
    for (const name of TOOL_ORDER) {
      const schema = schemas.get(name);
      // What a strict-mode model sends: every field, null for those it leaves out.
      const args = {
        ...Object.fromEntries(Object.keys(schema.properties).map((k) => [k, null])),
        ...MINIMAL_INPUTS[name],
      };
      expect({ name, valid: ajv.validate(schema, args) }).toEqual({ name, valid: true });
      const res = await call(sid, openAiCall(`call_${name}`, name, args));
      expect(res.status).toBe(200);
      expect({ name, is_error: res.body.is_error, content: res.body.content }).toEqual({
        name,
        is_error: false,
        content: expect.any(String),
      });
    }
  });

  it('takes env as {name, value} pairs, the only map form a strict schema has', async () => {
    const sid = await engine.createSession();
    const start = await call(
      sid,
      openAiCall('call_s', 'process_start', {
        command: 'printf "%s" "$GREETING"',
        name: 'greet',
        cwd: null,
        tier: null,
        env: [{ name: 'GREETING', value: 'hello from env' }],
      }),
    );
    expect(start.body).toMatchObject({ is_error: false });
    await call(sid, openAiCall('call_w', 'process_wait', { processId: 'greet', timeoutMs: 5000 }));
    const logs = await call(
      sid,
      openAiCall('call_l', 'process_logs', { processId: 'greet', tail: null, sinceSeq: null }),
    );
    expect(logs.body.is_error).toBe(false);
    expect(logs.body.content).toContain('hello from env');
  });

  it("names bash's own field, command, in its input errors, never the action's code", async () => {
    const sid = await engine.createSession();
    const res = await call(sid, [
      openAiCall('a', 'bash', { command: 5, timeoutMs: null, state: null }),
      openAiCall('b', 'bash', { timeoutMs: null, state: null }),
      { type: 'tool_use', id: 'c', name: 'bash', input: { command: 'echo \u0000' } },
      openAiCall('d', 'bash', { command: 'true', state: 'forever' }),
    ]);
    expect(res.status).toBe(200);
    const [a, b, c, d] = res.body;
    expect(a.content).toBe('invalid input for bash: command: command must be a string');
    expect(b.content).toBe('invalid input for bash: command: command must be a string');
    expect(c).toMatchObject({ is_error: true, content: 'command: command contains a NUL byte' });
    expect(d.content).toMatch(/^invalid input for bash: state: /);
    for (const r of res.body) {
      expect(r.is_error).toBe(true);
      expect(r.content).not.toMatch(/\bcode\b/);
    }
  });

  it('documents strict and the call and answer shapes in OpenAPI', async () => {
    const doc = (await engine.request('GET', '/docs-json')).body;
    const list = doc.paths['/v1/tools'].get;
    expect(list.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: 'strict',
          in: 'query',
          required: false,
          schema: expect.objectContaining({ enum: ['true', 'false'] }),
        }),
        expect.objectContaining({ name: 'format', in: 'query', required: false }),
      ]),
    );
    expect(list.parameters).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: 'format',
          schema: expect.objectContaining({ enum: ['anthropic', 'openai', 'openai-responses'] }),
        }),
      ]),
    );
    const schemas = doc.components.schemas;
    const named = (refs: Array<{ $ref: string }>) =>
      refs.map((r) => r.$ref.replace('#/components/schemas/', ''));
    expect(schemas.ResponsesTool.required).toEqual(['type', 'name', 'description', 'parameters', 'strict']);
    // Both Responses lists are what the document says a tool list is.
    const validate = new Ajv({ strict: false }).compile({
      $ref: '#/components/schemas/ToolList',
      components: doc.components,
    });
    for (const query of ['format=openai-responses', 'format=openai-responses&strict=false']) {
      const body = (await engine.request('GET', `/v1/tools?${query}`)).body;
      expect({ query, valid: validate(body), errors: validate.errors ?? null }).toEqual({
        query,
        valid: true,
        errors: null,
      });
    }
    const calls = doc.paths['/v1/sessions/{sessionId}/tool-calls'].post;
    const body = calls.requestBody.content['application/json'].schema;
    expect(body.oneOf).toEqual([
      { $ref: '#/components/schemas/ToolCall' },
      expect.objectContaining({ type: 'array', items: { $ref: '#/components/schemas/ToolCall' } }),
    ]);
    expect(named(schemas.ToolCall.anyOf)).toEqual([
      'PlainToolCall',
      'AnthropicToolUse',
      'OpenAiToolCall',
      'ResponsesFunctionCall',
      'OtherToolCall',
      'OtherFunctionCall',
    ]);
    expect(schemas.OtherToolCall.required).toEqual(['id']);
    expect(schemas.OtherFunctionCall.required).toEqual(['type', 'call_id']);
    const answer = calls.responses['200'].content['application/json'].schema;
    expect(answer.oneOf[0]).toEqual({ $ref: '#/components/schemas/ToolCallAnswer' });
    expect(named(schemas.ToolCallAnswer.oneOf)).toEqual([
      'ResponsesFunctionCallOutput',
      'OpenAiToolResult',
      'AnthropicToolResult',
      'ToolResult',
    ]);
    expect(schemas.OpenAiToolResult.properties.message.properties.role.enum).toEqual(['tool']);
    expect(schemas.ResponsesFunctionCallOutput.properties.item.properties.type.enum).toEqual([
      'function_call_output',
    ]);
    expect(calls.description).toContain('tool_call_id');
    expect(calls.description).toContain('function_call_output');
  });
});
