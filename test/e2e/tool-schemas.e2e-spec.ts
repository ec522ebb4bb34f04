import Ajv from 'ajv';
import fc from 'fast-check';
import { ToolCallsService } from '../../apps/engine/src/engine/tools/tool-calls.service';
import { readToolInput } from '../../apps/engine/src/engine/tools/tool-input';
import { ToolsService } from '../../apps/engine/src/engine/tools/tools.service';
import { McpToolCalls } from '../../apps/engine/src/edge/mcp/mcp-tool-calls.service';
import { SessionsService } from '../../apps/engine/src/session/sessions/sessions.service';
import type { Session } from '../../apps/engine/src/state/sessions/session.model';
import { EngineHarness } from '../support/engine-harness';
import { SKILL_SCHEMA_KINDS } from '../support/skill-schema-kinds';
import { arbitraryOf, type FieldRules, plainJson, toStrictForm } from '../support/schema-arbitrary';

jest.setTimeout(180_000);

/**
 * What the engine advertises for its tools and what it accepts cannot drift apart (issue 35): for every tool of every
 * format — `anthropic` (which MCP's `tools/list` serves as is), `openai`, and `openai` strict — and for three kinds of
 * skill schema (a discriminated `oneOf`, a free-form object, nested closed objects), property-based:
 *
 * 1. every input valid against the tool's own schema is accepted by the engine's validation of a tool call, and, for
 *    a strict tool, its strict-mode form (every field, `null` for the left-out ones, maps as pairs) is valid against
 *    the advertised strict schema and accepted too: strict mode offers every input the tool takes;
 * 2. every input the engine accepts, as the engine reads it, is valid against the advertised schema (for a strict
 *    tool, in its strict-mode form).
 *
 * "Accepted" is `ToolCallsService.check`: the validation a call goes through before it runs (the tool's input, the
 * action body, the handler's checks), nothing recorded or run. Fields whose valid values the schemas state in words
 * (workspace paths, variable names, regular expressions, …) take their values from `RULES`, as in the Schemathesis
 * hooks.
 */

/** Fixed, so CI checks what a developer's run checked; SWITCHYARD_TOOL_SCHEMAS_SEED and _RUNS explore further. */
const SEED = Number(process.env.SWITCHYARD_TOOL_SCHEMAS_SEED ?? 35);
const RUNS = Number(process.env.SWITCHYARD_TOOL_SCHEMAS_RUNS ?? 30);

/** A relative path inside the workspace (the path guard's rules). */
const relativePath = fc.stringMatching(/^[a-z][a-z0-9]{0,6}(\/[a-z0-9]{1,6}){0,2}(\.txt)?$/);
const RULES: FieldRules = {
  path: relativePath,
  to: relativePath,
  cwd: relativePath,
  env: fc.dictionary(fc.stringMatching(/^V_[A-Z0-9_]{0,6}$/), fc.stringMatching(/^[a-z0-9 ]{0,8}$/), {
    maxKeys: 3,
  }),
  pattern: fc.constantFrom('foo', 'a.*b', '^x', 'TODO'),
  glob: fc.constantFrom('*.txt', '**/*.md', 'src/*'),
  url: fc.constantFrom('https://example.com/', 'http://example.org/a?b=1'),
  processId: fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
  name: fc.stringMatching(/^[a-z][a-z0-9-]{0,8}$/),
};

/** Rules between fields that tools state in their descriptions (a JSON Schema `oneOf` at the top level of a tool's
 * input is refused by Anthropic's and OpenAI's APIs), applied to generated inputs. */
const WAIT_TARGETS = ['selector', 'text', 'url', 'loadState'];
const TOOL_RULES: Record<string, (input: Record<string, unknown>) => Record<string, unknown>> = {
  // "Wait for a selector, a text, a URL or a load state (exactly one)."
  browser_wait_for: (input) => {
    const chosen = WAIT_TARGETS.find((k) => k in input) ?? 'loadState';
    const out = Object.fromEntries(
      Object.entries(input).filter(([k]) => !WAIT_TARGETS.includes(k) || k === chosen),
    );
    return chosen in out ? out : { ...out, loadState: 'load' };
  },
};

const SKILLS = SKILL_SCHEMA_KINDS;

interface Listed {
  name: string;
  schema: Record<string, unknown>;
  strict: boolean;
}

describe('advertised tool schemas and the engine’s validation agree, for every tool and format', () => {
  let engine: EngineHarness;
  let session: Session;
  let calls: ToolCallsService;
  let tools: ToolsService;
  const ajv = new Ajv({ strict: false, allErrors: true });
  const lists: Record<'anthropic' | 'openai' | 'openai-strict', Listed[]> = {
    anthropic: [],
    openai: [],
    'openai-strict': [],
  };

  let responses: { strict: any[]; plain: any[] };
  let chat: { strict: any[]; plain: any[] };

  beforeAll(async () => {
    engine = await EngineHarness.start({
      DOCKER_HOST: 'unix:///nonexistent/switchyard-tool-schemas/docker.sock',
      SWITCHYARD_POOL_MIN: '0',
    });
    for (const skill of SKILLS) {
      const res = await engine.request('POST', '/v1/skills', skill);
      expect(res.status).toBe(201);
    }
    const sid = await engine.createSession();
    const tenant = (await engine.request('GET', '/v1/whoami')).body.tenant as string;
    session = engine.app.get(SessionsService).get(tenant, sid);
    tools = engine.app.get(ToolsService);
    calls = engine.app.get(ToolCallsService);
    const get = async (query: string) =>
      (await engine.request('GET', `/v1/tools?${query}&sessionId=${sid}`)).body.tools as any[];
    lists.anthropic = (await get('format=anthropic')).map((t) => ({
      name: t.name,
      schema: t.input_schema,
      strict: false,
    }));
    lists.openai = (await get('format=openai')).map((t) => ({
      name: t.function.name,
      schema: t.function.parameters,
      strict: false,
    }));
    lists['openai-strict'] = (await get('format=openai&strict=true')).map((t) => ({
      name: t.function.name,
      schema: t.function.parameters,
      strict: t.function.strict === true,
    }));
    // The Responses API's lists are the Chat Completions ones, flat (checked below): what holds for those holds here.
    responses = {
      strict: await get('format=openai-responses'),
      plain: await get('format=openai-responses&strict=false'),
    };
    chat = { strict: await get('format=openai&strict=true'), plain: await get('format=openai') };
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it('lists every built-in tool and the three skills in every format, MCP’s list as the anthropic one', async () => {
    const names = lists.anthropic.map((t) => t.name);
    expect(names).toEqual(expect.arrayContaining(SKILLS.map((s) => s.name)));
    for (const format of ['openai', 'openai-strict'] as const) {
      expect(lists[format].map((t) => t.name)).toEqual(names);
    }
    const strictness = Object.fromEntries(lists['openai-strict'].map((t) => [t.name, t.strict]));
    // The skills: strict exactly when strict mode can take every input they accept.
    expect({
      shape_area: strictness.shape_area,
      echo_any: strictness.echo_any,
      nested_note: strictness.nested_note,
    }).toEqual({
      shape_area: true,
      echo_any: false,
      nested_note: true,
    });
    expect(Object.entries(strictness).filter(([n, s]) => !s && !SKILLS.some((k) => k.name === n))).toEqual(
      [],
    );
    // The Responses API's lists: the Chat Completions functions one level up, each saying strict, skills included.
    expect(responses.strict).toEqual(chat.strict.map((t) => ({ type: 'function', ...t.function })));
    expect(responses.plain).toEqual(
      chat.plain.map((t) => ({ type: 'function', ...t.function, strict: false })),
    );
    expect(responses.strict.find((t) => t.name === 'echo_any')).toMatchObject({ strict: false });
    // MCP's tools/list serves the anthropic schemas as they are.
    const mcp = engine.app.get(McpToolCalls).list(session.tenant, session.id);
    expect(mcp.map((t) => [t.name, t.inputSchema])).toEqual(lists.anthropic.map((t) => [t.name, t.schema]));
  });

  /** The tool's own schema: what the anthropic list (and MCP) advertise. */
  const ownSchema = (name: string): Record<string, unknown> =>
    lists.anthropic.find((t) => t.name === name)!.schema;

  describe.each(['anthropic', 'openai', 'openai-strict'] as const)('%s', (format) => {
    it('accepts every input valid against the tool’s schema (for strict tools: in strict form, valid there too)', () => {
      for (const tool of lists[format]) {
        const own = ownSchema(tool.name);
        const validAdvertised = ajv.compile(tool.schema);
        fc.assert(
          fc.property(arbitraryOf(own, RULES), (generated) => {
            const rule = TOOL_RULES[tool.name];
            const input = rule ? rule(generated as Record<string, unknown>) : generated;
            const sent = tool.strict ? toStrictForm(own, input) : input;
            const valid = validAdvertised(sent);
            const problem = calls.check(session, tool.name, sent);
            return valid && problem === undefined
              ? true
              : (() => {
                  throw new Error(
                    `${format} ${tool.name}: ${JSON.stringify(sent)} ` +
                      (valid
                        ? `refused: ${problem}`
                        : `invalid against the advertised schema: ${ajv.errorsText(validAdvertised.errors)}`),
                  );
                })();
          }),
          { numRuns: RUNS, seed: SEED },
        );
      }
    });

    it('describes every input the engine accepts', () => {
      for (const tool of lists[format]) {
        const own = ownSchema(tool.name);
        const validAdvertised = ajv.compile(tool.schema);
        const fields = Object.keys((own.properties as Record<string, unknown> | undefined) ?? {});
        // Inputs near the schema: its fields (and one it does not have) holding values of their own kind or any JSON.
        const loose = fc.dictionary(
          fc.constantFrom(...fields, 'extra'),
          fc.oneof(plainJson, ...fields.map((f) => arbitraryOf((own.properties as any)[f], RULES, f))),
          { maxKeys: fields.length + 1 },
        );
        fc.assert(
          fc.property(fc.oneof(arbitraryOf(own, RULES), loose), (input) => {
            if (calls.check(session, tool.name, input) !== undefined) return true;
            const read = readAsEngine(tool.name, input);
            const sent = tool.strict ? toStrictForm(own, read) : read;
            if (validAdvertised(sent)) return true;
            throw new Error(
              `${format} ${tool.name}: the engine accepts ${JSON.stringify(input)}, which the advertised schema does ` +
                `not describe (${JSON.stringify(sent)}): ${ajv.errorsText(validAdvertised.errors)}`,
            );
          }),
          { numRuns: RUNS * 2, seed: SEED },
        );
      }
    });
  });

  /** An accepted input as the engine reads it (its own reading: `null` fields absent, pairs as maps). */
  function readAsEngine(name: string, input: unknown): unknown {
    const reading = readToolInput(tools.find(name, session.tenant)!, input);
    if ('error' in reading) throw new Error(`${name}: accepted, yet unreadable: ${reading.error}`);
    return reading.input;
  }
});
