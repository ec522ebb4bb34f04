import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { Driver } from 'neo4j-driver';
import { holdTestNeo4j, neo4jTestServer } from '../../libs/context-graph/src/testing';
import { EngineHarness } from '../support/engine-harness';
import { compareStores, neo4jEnv, waitForGraph, withEngineStores } from '../support/neo4j-graph';
import { SANDBOX_BACKENDS, type SandboxBackendUnderTest } from '../support/sandbox-backends';

/**
 * Skills through the REST API, on both graph stores: tools made of other tools, loaded from a directory and added per
 * tenant, whose bodies run in the tier their risk picks and call tools and skills with ctx.call over their channel;
 * schemas checked both ways, the depth limit, the call tree in the graph, and policies that apply to them. On every
 * sandbox backend: on Kubernetes a skill's run holds the session pod and its calls (file tools, nested skills) run
 * beside it, nested in it; a one-off skill's calls act on its one-off pod's copy of the workspace.
 */
const server = neo4jTestServer();

const object = (properties: Record<string, unknown>, required: string[]) => ({
  type: 'object',
  properties,
  required,
  additionalProperties: false,
});

/** Engine skills, one directory each: a python one, a node one that calls it, one the depth limit stops. */
function writeSkills(dir: string): void {
  const skill = (name: string, manifest: Record<string, unknown>, body: [string, string]) => {
    mkdirSync(path.join(dir, name));
    writeFileSync(path.join(dir, name, 'skill.json'), JSON.stringify({ name, ...manifest }));
    writeFileSync(path.join(dir, name, body[0]), body[1]);
  };
  skill(
    'count-words',
    {
      description: 'Counts the words of a workspace file',
      inputSchema: object({ path: { type: 'string', minLength: 1 } }, ['path']),
      outputSchema: object({ words: { type: 'integer' } }, ['words']),
    },
    [
      'main.py',
      'def main(input, ctx):\n' +
        '    read = ctx.call("read", {"path": input["path"]})\n' +
        '    return {"words": len(read["output"]["content"].split())}\n',
    ],
  );
  // child_process makes it medium risk: its body runs in the pooled tier.
  skill(
    'report',
    {
      description: 'Writes a word count report of a file',
      inputSchema: object({ path: { type: 'string' } }, ['path']),
      outputSchema: object({ words: { type: 'integer' }, file: { type: 'string' } }, ['words', 'file']),
    },
    [
      'main.js',
      "const { execFileSync } = require('child_process');\n" +
        'async function main(input, ctx) {\n' +
        "  execFileSync('true');\n" +
        "  const { words } = await ctx.skill('count-words', { path: input.path });\n" +
        "  const file = 'report.txt';\n" +
        "  await ctx.call('write', { path: file, content: `${input.path}: ${words} words\\n` });\n" +
        '  return { words, file };\n' +
        '}\n',
    ],
  );
  // Reading the environment and running a program: high risk, so the one-off container (gVisor where installed).
  skill(
    'env-note',
    {
      description: 'Notes the sandbox user in a file',
      inputSchema: object({}, []),
      outputSchema: object({ user: { type: 'string' } }, ['user']),
    },
    [
      'main.py',
      'import os, subprocess\n' +
        'def main(input, ctx):\n' +
        '    user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip() or os.environ.get("HOME", "")\n' +
        '    ctx.call("write", {"path": "note.txt", "content": user})\n' +
        '    return {"user": user}\n',
    ],
  );
  skill(
    'recurse',
    {
      description: 'Calls itself one level deeper until refused',
      inputSchema: object({ n: { type: 'integer' } }, ['n']),
      outputSchema: object({ deepest: { type: 'integer' }, refusal: { type: 'string' } }, ['deepest']),
    },
    [
      'main.py',
      'from switchyard_skill import CallError\n' +
        'def main(input, ctx):\n' +
        '    try:\n' +
        '        return ctx.skill("recurse", {"n": input["n"] + 1})\n' +
        '    except CallError as err:\n' +
        '        return {"deepest": input["n"], "refusal": "%s: %s" % (err.code, err)}\n',
    ],
  );
  skill(
    'bad-output',
    {
      description: 'Returns what its schema refuses',
      inputSchema: object({}, []),
      outputSchema: object({ words: { type: 'integer' } }, ['words']),
    },
    ['main.py', 'def main(input, ctx):\n    return {"words": "many"}\n'],
  );
}

function skillSuite(
  extraEnv: () => Record<string, string>,
  neo4j?: () => Driver,
  backend?: SandboxBackendUnderTest,
): void {
  let engine: EngineHarness;
  let dir: string;
  // Low-risk code runs in the session's pod on Kubernetes (its workspace is there): the tier is floored at pooled.
  const lowTier = backend?.name === 'kubernetes' ? 'pooled' : 'subprocess';

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-skills-'));
    writeSkills(dir);
    engine = await EngineHarness.start({
      ...(backend ? await backend.env() : {}),
      ...extraEnv(),
      SWITCHYARD_SKILLS_DIR: dir,
      SWITCHYARD_SKILL_MAX_DEPTH: '3',
    });
  });
  afterAll(async () => {
    await engine?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  const node = (view: any, id: string) => view.nodes.find((n: any) => n.id === id);

  it('lists skills, and offers them as tools in both formats', async () => {
    const skills = (await engine.request('GET', '/v1/skills')).body.skills;
    expect(skills.map((s: any) => [s.name, s.language, s.source])).toEqual([
      ['bad-output', 'python', 'engine'],
      ['count-words', 'python', 'engine'],
      ['env-note', 'python', 'engine'],
      ['recurse', 'python', 'engine'],
      ['report', 'node', 'engine'],
    ]);
    const anthropic = (await engine.request('GET', '/v1/tools')).body.tools;
    expect(anthropic.find((t: any) => t.name === 'count-words')).toEqual({
      name: 'count-words',
      description: 'Counts the words of a workspace file',
      input_schema: object({ path: { type: 'string', minLength: 1 } }, ['path']),
    });
    const openai = (await engine.request('GET', '/v1/tools?format=openai&strict=true')).body.tools;
    expect(openai.find((t: any) => t.function.name === 'report').function).toMatchObject({ strict: true });
  });

  it('runs a skill that calls a skill and a tool: checked output, the call tree in the graph', async () => {
    const sid = await engine.createSession();
    await engine.action(sid, { type: 'file', op: 'write', path: 'notes.txt', content: 'one two three' });
    const r = await engine.action(sid, { type: 'skill', name: 'report', input: { path: 'notes.txt' } });
    expect(r).toMatchObject({
      type: 'skill',
      status: 'succeeded',
      tier: 'pooled',
      output: { skill: 'report', value: { words: 3, file: 'report.txt' } },
    });
    const file = await engine.action(sid, { type: 'file', op: 'read', path: 'report.txt' });
    expect(file.output.content).toBe('notes.txt: 3 words\n');

    const actions = (await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions;
    const byOp = Object.fromEntries(actions.map((a: any) => [a.inputSummary.split(':')[0], a]));
    const countWords = actions.find((a: any) => a.type === 'skill' && a.id !== r.id);
    const read = actions.find((a: any) => a.type === 'file' && a.calledBy);
    expect(countWords).toMatchObject({
      status: 'succeeded',
      tier: lowTier,
      calledBy: { actionId: r.id, depth: 1 },
    });
    expect(read).toMatchObject({ status: 'succeeded', calledBy: { actionId: countWords.id, depth: 2 } });
    expect(byOp).toBeDefined();

    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    const calls = graph.edges.filter((e: any) => e.type === 'CALLED_BY');
    expect(calls.map((e: any) => [e.from, e.to, e.properties.depth])).toEqual(
      expect.arrayContaining([
        [countWords.id, r.id, 1],
        [read.id, countWords.id, 2],
      ]),
    );
    expect(calls).toHaveLength(3);
    expect(node(graph, r.id).properties.type).toBe('skill');

    const context = (await engine.request('GET', `/v1/sessions/${sid}/actions/${read.id}/context`)).body;
    expect(context.callers.map((c: any) => c.id)).toEqual([countWords.id, r.id]);
    const top = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}/context`)).body;
    expect(top.calls.map((c: any) => c.id)).toEqual(
      actions.filter((a: any) => a.calledBy?.actionId === r.id).map((a: any) => a.id),
    );
  });

  it('runs a high-risk skill in the one-off container, its calls coming back over its channel', async () => {
    const sid = await engine.createSession();
    const r = await engine.action(sid, { type: 'skill', name: 'env-note', input: {} });
    expect(r).toMatchObject({
      status: 'succeeded',
      tier: 'container',
      output: { value: { user: 'sandbox' } },
    });
    expect((await engine.action(sid, { type: 'file', op: 'read', path: 'note.txt' })).output.content).toBe(
      'sandbox',
    );
  });

  it('checks input and output against the schemas, naming the path', async () => {
    const sid = await engine.createSession();
    const bad = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'skill',
      name: 'count-words',
      input: { path: '' },
    });
    expect(bad.status).toBe(400);
    expect(bad.body.error).toMatchObject({ code: 'SKILL_INPUT_INVALID', fields: [{ path: 'input.path' }] });
    const missing = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'skill',
      name: 'count-words',
      input: {},
    });
    expect(missing.body.error.fields[0].path).toBe('input.path');
    const unknown = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'skill',
      name: 'nope',
    });
    expect(unknown.status).toBe(404);
    expect(unknown.body.error).toMatchObject({ code: 'UNKNOWN_SKILL', fields: [{ path: 'name' }] });
    const out = await engine.action(sid, { type: 'skill', name: 'bad-output', input: {} });
    expect(out).toMatchObject({
      status: 'failed',
      error: { class: 'validation', code: 'SKILL_OUTPUT_INVALID' },
    });
    expect(out.error.message).toContain('output.words');
    expect(out.error.message).toContain('#/properties/words/type');
  });

  it('refuses calls nested deeper than SWITCHYARD_SKILL_MAX_DEPTH, recorded in the call tree', async () => {
    const sid = await engine.createSession();
    const r = await engine.action(sid, { type: 'skill', name: 'recurse', input: { n: 0 } });
    // The whole value on a failure: a refusal other than CALL_DEPTH says which call ended and why.
    expect(r).toMatchObject({ status: 'succeeded' });
    expect(r.output.value).toEqual({ deepest: 3, refusal: expect.stringContaining('CALL_DEPTH') });
    const actions = (await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions;
    expect(actions.map((a: any) => [a.status, a.calledBy?.depth ?? 0])).toEqual([
      ['succeeded', 0],
      ['succeeded', 1],
      ['succeeded', 2],
      ['succeeded', 3],
      ['denied', 4],
    ]);
  });

  it('adds a tenant skill over the API, calls it through a tool call, and applies policies to skills', async () => {
    const add = (body: Record<string, unknown>) => engine.request('POST', '/v1/skills', body);
    const shout = {
      name: 'shout',
      description: 'Upper-cases a text',
      inputSchema: object({ text: { type: 'string' } }, ['text']),
      outputSchema: object({ text: { type: 'string' } }, ['text']),
      language: 'node',
      code: 'exports.main = async (input) => ({ text: input.text.toUpperCase() });\n',
    };
    expect((await add({ ...shout, inputSchema: { type: 'array' } })).body.error.fields[0].path).toBe(
      'inputSchema',
    );
    expect((await add({ ...shout, inputSchema: { type: 'object', properties: 3 } })).status).toBe(400);
    const taken = await add({ ...shout, name: 'python' });
    expect([taken.status, taken.body.error.code]).toEqual([409, 'SKILL_NAME_TAKEN']);
    expect((await add(shout)).status).toBe(201);
    expect((await add(shout)).status).toBe(409);
    const sid = await engine.createSession();
    const call = await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, {
      id: 'call_1',
      type: 'function',
      function: { name: 'shout', arguments: JSON.stringify({ text: 'hi' }) },
    });
    expect(call.body).toMatchObject({ tool_call_id: 'call_1', is_error: false });
    expect(JSON.parse(call.body.content)).toEqual({ skill: 'shout', value: { text: 'HI' } });

    // A session that may not use count-words sees no such tool, and report fails where it calls it.
    const fenced = await engine.createSession({
      policy: { rules: [{ effect: 'deny', match: { tool: 'count-words' } }] },
    });
    const tools = (await engine.request('GET', `/v1/tools?sessionId=${fenced}`)).body.tools.map(
      (t: any) => t.name,
    );
    expect(tools).toContain('report');
    expect(tools).not.toContain('count-words');
    await engine.action(fenced, { type: 'file', op: 'write', path: 'n.txt', content: 'a b' });
    const r = await engine.action(fenced, { type: 'skill', name: 'report', input: { path: 'n.txt' } });
    expect(r.status).toBe('failed');
    expect(r.stderr).toContain('count-words is blocked by the session policy');
    const denied = (await engine.request('GET', `/v1/sessions/${fenced}/actions`)).body.actions.find(
      (a: any) => a.status === 'denied',
    );
    expect(denied).toMatchObject({
      calledBy: { actionId: r.id, depth: 1 },
      error: { code: 'POLICY_DENIED' },
    });
    expect((await engine.request('DELETE', '/v1/skills/shout')).status).toBe(204);
    expect((await engine.request('DELETE', '/v1/skills/count-words')).status).toBe(403);
  });

  if (neo4j) {
    it('Neo4j holds the same call trees as the local store', async () => {
      await waitForGraph(engine, (g) => g.backlog === 0 && g.status === 'ok');
      const sessions = (await engine.request('GET', '/v1/sessions')).body.sessions.map((s: any) => s.id);
      await withEngineStores(engine.dataDir, server, (local, remote) =>
        compareStores(local, remote, sessions, neo4j()),
      );
    });
  }
}

describe.each(SANDBOX_BACKENDS.map((b) => [b.name, b] as const))(
  'skills (embedded graph, %s)',
  (_name, backend) => {
    skillSuite(() => ({}), undefined, backend);
  },
);

describe('skills (examples)', () => {
  it('runs the example skills as docs/policies-and-skills.md shows them (examples/skills)', async () => {
    const engine = await EngineHarness.start({
      SWITCHYARD_SKILLS_DIR: path.join(__dirname, '..', '..', 'examples', 'skills'),
    });
    try {
      const sid = await engine.createSession();
      await engine.action(sid, {
        type: 'file',
        op: 'write',
        path: 'docs/a.txt',
        content: 'one two\nthree\n',
      });
      await engine.action(sid, { type: 'file', op: 'write', path: 'docs/b.txt', content: 'four\n' });
      const r = await engine.action(sid, { type: 'skill', name: 'file-report', input: { dir: 'docs' } });
      expect(r).toMatchObject({
        status: 'succeeded',
        output: { value: { files: 2, words: 4, report: 'report.md' } },
      });
      const report = await engine.action(sid, { type: 'file', op: 'read', path: 'report.md' });
      expect(report.output.content).toContain('| docs/a.txt | 2 | 3 |');
      const calls = (await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions
        .filter((a: any) => a.calledBy)
        .map((a: any) => [a.type, a.inputSummary.split(':')[0], a.calledBy.depth]);
      expect(calls).toEqual([
        ['file', 'find docs', 1],
        ['skill', 'skill word-count', 1],
        ['file', 'read docs/a.txt', 2],
        ['skill', 'skill word-count', 1],
        ['file', 'read docs/b.txt', 2],
        ['file', 'write report.md', 1],
      ]);
    } finally {
      await engine.stop();
    }
  });
});

describe('skills (Neo4j graph)', () => {
  const held = holdTestNeo4j(server);
  skillSuite(() => neo4jEnv(server), held.admin);
});
