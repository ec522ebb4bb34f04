import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { EngineHarness } from '../support/engine-harness';
import {
  collidingTitles,
  freeFormObjectsWithoutAdditionalProperties,
  mediaTypesWithoutSchema,
  requiredNullableProperties,
} from '../support/openapi-generator-rules';
import { venvBin } from '../support/runtime-dir';

/**
 * Clients generated from the engine's own `/docs-json` by tools nobody here wrote, pinned: openapi-typescript (the
 * devDependency, 7.13.0), openapi-python-client 0.29.1 and datamodel-code-generator 0.89.0 (scripts/generator-tools.sh).
 * Each generates from the document a running engine serves, and what it made compiles or imports and makes real
 * calls: a session, code run, tool calls, the answers read through the generated types. One engine for the suite.
 */

const run = promisify(execFile);
const REPO = path.join(__dirname, '..', '..');
const BIN = path.join(REPO, 'node_modules', '.bin');
const GENERATOR_BIN = venvBin('generator-venv');
const PYTHON = path.join(GENERATOR_BIN, 'python');

/** A program written against openapi-typescript's `paths`, with plain `fetch` (openapi-fetch is not a dependency). */
const TYPESCRIPT_PROGRAM = `
import type { components, paths } from './schema';

type JsonBody<Op> = Op extends { requestBody?: { content: { 'application/json': infer B } } } ? B : never;
type JsonAnswer<Op, Code extends number> = Op extends {
  responses: { [K in Code]: { content: { 'application/json': infer R } } };
}
  ? R
  : never;
// A type that came out as never would take any value: each answer's type must be a real one.
type Real<T> = [T] extends [never] ? false : unknown extends T ? false : true;

type CreateSession = paths['/v1/sessions']['post'];
type RunAction = paths['/v1/sessions/{sessionId}/actions']['post'];
type CallTools = paths['/v1/sessions/{sessionId}/tool-calls']['post'];

const base = process.argv[2];

async function post<Op, Code extends number>(route: string, body: JsonBody<Op>): Promise<JsonAnswer<Op, Code>> {
  const res = await fetch(base + route, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  if (!res.ok) throw new Error(\`\${route}: \${res.status} \${await res.text()}\`);
  return (await res.json()) as JsonAnswer<Op, Code>;
}

async function main(): Promise<void> {
  // Free-form objects take any value: metadata, a tool call's input (the README's call, as is).
  const session = await post<CreateSession, 201>('/v1/sessions', { metadata: { owner: 'generated', run: 1 } });
  const code: JsonBody<RunAction> = { type: 'code', language: 'python', code: 'print(6 * 7)' };
  const result = await post<RunAction, 200>(\`/v1/sessions/\${session.id}/actions\`, code);
  const call: JsonBody<CallTools> = { id: 'c1', name: 'bash', input: { command: 'echo hi' } };
  const answer = await post<CallTools, 200>(\`/v1/sessions/\${session.id}/tool-calls\`, call);
  const real: [Real<typeof session>, Real<typeof result>, Real<typeof answer>] = [true, true, true];
  const status: components['schemas']['ActionResult']['status'] = result.status;
  const stdout: string | undefined = result.stdout;
  const metadata: Record<string, unknown> | undefined = session.metadata;
  const content = Array.isArray(answer) ? undefined : answer.content;
  console.log(JSON.stringify({ real, id: session.id, metadata, status, stdout, content }));
}

main().catch((e: unknown) => {
  console.error(e);
  process.exit(1);
});
`;

/** `tsc --strict` as a project would run it on Node (fetch and streams from @types/node); libraries' .d.ts unchecked. */
const STRICT_TSC = [
  '--strict',
  '--noUncheckedIndexedAccess',
  '--skipLibCheck',
  '--target',
  'ES2024',
  '--lib',
  'ES2024',
  '--module',
  'commonjs',
  '--moduleResolution',
  'node',
  '--typeRoots',
  path.join(REPO, 'node_modules', '@types'),
  '--types',
  'node',
];

/** A tool call as the README writes it, through @switchyard/client, whose types openapi-typescript generated. */
const CLIENT_PROGRAM = (client: string) => `
import { SwitchyardClient } from ${JSON.stringify(client)};

export async function call(client: SwitchyardClient, sid: string): Promise<string | undefined> {
  const answer = await client.tools.call(sid, { id: 'c1', name: 'bash', input: { command: 'x' } });
  return Array.isArray(answer) ? undefined : typeof answer.content === 'string' ? answer.content : undefined;
}
`;

describe('clients generated from the OpenAPI document by outside generators', () => {
  let engine: EngineHarness;
  let dir: string;
  let documentPath: string;
  let document: unknown;

  beforeAll(async () => {
    if (!existsSync(PYTHON)) {
      throw new Error(
        `The pinned generators are not installed at ${GENERATOR_BIN}: run \`bash scripts/generator-tools.sh\``,
      );
    }
    engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '0' });
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-generated-'));
    const res = await engine.request('GET', '/docs-json');
    expect(res.status).toBe(200);
    document = res.body;
    documentPath = path.join(dir, 'openapi.json');
    writeFileSync(documentPath, JSON.stringify(document));
  });
  afterAll(async () => {
    await engine?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('serves a document that keeps what the generators need', () => {
    expect({
      freeForm: freeFormObjectsWithoutAdditionalProperties(document),
      titles: collidingTitles(document),
      requiredNullable: requiredNullableProperties(document),
      bodiesWithoutSchema: mediaTypesWithoutSchema(document),
    }).toEqual({ freeForm: [], titles: [], requiredNullable: [], bodiesWithoutSchema: [] });
  });

  it('openapi-typescript: types a plain-fetch program that compiles under tsc --strict and runs', async () => {
    const out = path.join(dir, 'ts');
    await run(path.join(BIN, 'openapi-typescript'), [documentPath, '-o', path.join(out, 'schema.ts')], {
      cwd: REPO,
    });
    writeFileSync(path.join(out, 'main.ts'), TYPESCRIPT_PROGRAM);
    const tsc = run(
      path.join(BIN, 'tsc'),
      [...STRICT_TSC, '--outDir', path.join(out, 'js'), path.join(out, 'main.ts')],
      { cwd: out },
    );
    await expect(tsc).resolves.toBeDefined();
    const { stdout } = await run(process.execPath, [path.join(out, 'js', 'main.js'), engine.baseUrl]);
    expect(JSON.parse(stdout)).toEqual({
      real: [true, true, true],
      id: expect.stringMatching(/^ses_/),
      metadata: { owner: 'generated', run: 1 },
      status: 'succeeded',
      stdout: '42\n',
      content: '[stdout]\nhi\n\n[exit_code]\n0',
    });
  });

  it("the README's tool call through @switchyard/client compiles under tsc --strict", async () => {
    const file = path.join(dir, 'readme-call.ts');
    writeFileSync(file, CLIENT_PROGRAM(path.join(REPO, 'packages', 'client', 'src', 'index')));
    await expect(
      run(path.join(BIN, 'tsc'), [...STRICT_TSC, '--noEmit', file], { cwd: dir }),
    ).resolves.toBeDefined();
  });

  it('openapi-python-client: generates a client that imports, calls, and parses every answer into its model', async () => {
    const config = path.join(dir, 'openapi-python-client.yaml');
    // No formatting after generating (ruff): the code is the same, only slower to make. A tar (gzip-compressed or
    // not) and the browser view's JPEG are bytes, as application/octet-stream is: the only binary type the
    // generator knows by name (docs/api.md gives users the same file).
    writeFileSync(
      config,
      [
        'post_hooks: []',
        'content_type_overrides:',
        '  application/x-tar: application/octet-stream',
        '  application/gzip: application/octet-stream',
        '  image/jpeg: application/octet-stream',
        '',
      ].join('\n'),
    );
    const pkg = path.join(dir, 'py', 'switchyard_generated');
    const generated = await run(
      path.join(GENERATOR_BIN, 'openapi-python-client'),
      ['generate', '--path', documentPath, '--meta', 'none', '--output-path', pkg, '--config', config],
      { cwd: dir },
    );
    // It warns of each schema it drops and each operation it cannot generate: none.
    expect(generated.stdout + generated.stderr).not.toMatch(
      /Unable to|Could not|will not be generated|omitted/i,
    );
    const { stdout } = await run(PYTHON, [
      path.join(REPO, 'test', 'support', 'generated_python_client.py'),
      pkg,
      engine.baseUrl,
    ]);
    const content = (n: number) => `[stdout]\n${n}\n\n[exit_code]\n0`;
    expect(JSON.parse(stdout)).toEqual({
      session: { type: 'Session', id: expect.stringMatching(/^ses_/), same: true },
      metadata: { owner: 'generated-client', run: 1 },
      lastActionAt: null,
      result: { type: 'ActionResult', status: 'succeeded', stdout: '42\n', exitCode: 0 },
      answers: [
        { type: 'ToolResult', tool_use_id: 'c1', content: '[stdout]\nhi\n\n[exit_code]\n0', is_error: false },
        {
          type: 'ResponsesFunctionCallOutput',
          tool_use_id: 'call_1',
          call_id: 'call_1',
          content: content(42),
          is_error: false,
          item: { type: 'function_call_output', call_id: 'call_1', output: content(42) },
        },
      ],
      single: {
        type: 'ResponsesFunctionCallOutput',
        item: { type: 'function_call_output', call_id: 'call_1', output: content(42) },
      },
      tools: { type: 'ResponsesTool', first: 'bash' },
    });
  });

  it('datamodel-code-generator: makes pydantic models (default options) that take real answers', async () => {
    const models = path.join(dir, 'models.py');
    await run(
      path.join(GENERATOR_BIN, 'datamodel-codegen'),
      [
        '--input',
        documentPath,
        '--input-file-type',
        'openapi',
        '--output-model-type',
        'pydantic_v2.BaseModel',
        // Its own formatter, not black and isort: the same models, made faster.
        '--formatters',
        'builtin',
        '--output',
        models,
      ],
      { cwd: dir },
    );
    const { stdout } = await run(PYTHON, [
      path.join(REPO, 'test', 'support', 'generated_pydantic_models.py'),
      models,
      engine.baseUrl,
    ]);
    expect(JSON.parse(stdout)).toEqual({
      session: { before: null, after: true },
      code: { type: 'ActionResult', status: 'succeeded', stdout: '42\n' },
      cell: { output: 'CodeCellOutput', result: '42' },
      listing: { output: 'FileListOutput' },
      view: { type: 'ActionView', id: true },
      answers: ['ToolResult', 'ResponsesFunctionCallOutput', 'OpenAiToolResult', 'AnthropicToolResult'],
      tools: 'ResponsesTool',
    });
  });
});
