/**
 * The built engine as a real process (`npx nest build engine` first): a configuration it cannot use stops it with
 * exit 78 naming the variable, and its public OpenAPI document holds the API's schemas only. A bad PORT value is
 * covered by restart.e2e-spec.ts.
 */
import Ajv from 'ajv';
import { mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as tar from 'tar-stream';
import { ENGINE_ENV_SCHEMAS } from '../../apps/engine/src/platform/config/engine-config';
import { BrowserSite } from '../support/browser-site';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';

const EX_CONFIG = 'exit 78';

interface Link {
  operationId?: string;
  parameters?: Record<string, string>;
}

interface Operation {
  operationId?: string;
  responses: Record<
    string,
    { content?: Record<string, { schema?: FieldsSchema }>; links?: Record<string, Link> }
  >;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: { type?: string } }>;
}

const ERROR_REF = '#/components/schemas/ErrorResponse';

/** A real answer: its status and its body (parsed when JSON). */
interface Answer {
  status: number;
  body: unknown;
}

/** The parts of a JSON Schema that say which fields an object has. */
interface FieldsSchema {
  $ref?: string;
  properties?: Record<string, FieldsSchema>;
  additionalProperties?: boolean | FieldsSchema;
  items?: FieldsSchema;
  oneOf?: FieldsSchema[];
  anyOf?: FieldsSchema[];
}

const ISO_TIMESTAMP = /^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)$/;

describe('boot configuration (the built engine as a real process)', () => {
  const dataDirs: string[] = [];
  const newDataDir = (): string => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-boot-'));
    dataDirs.push(dir);
    return dir;
  };
  afterAll(() => dataDirs.forEach(removeDataDir));

  it('exits 78 naming NEO4J_URI when nothing listens at the Neo4j address', async () => {
    const closedPort = await freePort();
    const engine = EngineProcess.spawn(newDataDir(), await freePort(), {
      SWITCHYARD_GRAPH: 'neo4j',
      NEO4J_URI: `bolt://127.0.0.1:${closedPort}`,
      // Retries an unreachable server for this long: short, but long enough for a retry.
      SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS: '300',
      SWITCHYARD_POOL_MIN: '0',
    });
    try {
      expect(await engine.exited).toBe(EX_CONFIG);
      await engine.closed;
      expect(engine.log).toMatch(/^switchyard: Invalid configuration:\n {2}NEO4J_URI: .*Neo4j/m);
      expect(engine.log).not.toContain('failed to start');
    } finally {
      await engine.stop('SIGKILL');
    }
  });

  describe('GET /docs-json', () => {
    let engine: EngineProcess;
    let site: BrowserSite;
    let document: {
      paths: Record<string, Record<string, Operation>>;
      servers?: Array<{ url: string }>;
      components: {
        schemas: Record<string, unknown>;
        securitySchemes?: Record<string, Record<string, unknown>>;
      };
    };
    beforeAll(async () => {
      // Pages for the browser rows, on the one loopback address the engine allows.
      site = await BrowserSite.start('127.0.0.2');
      engine = await EngineProcess.start(newDataDir(), await freePort(), {
        SWITCHYARD_POOL_MIN: '0',
        SWITCHYARD_BROWSER_ALLOWLIST: '127.0.0.2',
      });
      const res = await engine.request<typeof document>('GET', '/docs-json');
      expect(res.status).toBe(200);
      document = res.body;
    });
    afterAll(async () => {
      await engine?.stop('SIGTERM');
      await site?.stop();
    });

    const schemaAt = (ref: string): FieldsSchema =>
      document.components.schemas[ref.slice('#/components/schemas/'.length)] as FieldsSchema;

    /**
     * Fields of `value` that `schema` does not name (JSON Schema lets them through unless told otherwise). A map
     * (`additionalProperties`) names every key; a body of a `oneOf`/`anyOf` is held to the variant naming most of it.
     */
    const unnamedFields = (schema: FieldsSchema, value: unknown, at: string): string[] => {
      const s = schema.$ref ? schemaAt(schema.$ref) : schema;
      const variants = s.oneOf ?? s.anyOf;
      if (variants) {
        return variants
          .map((v) => unnamedFields(v, value, at))
          .reduce((best, problems) => (problems.length < best.length ? problems : best));
      }
      if (Array.isArray(value))
        return s.items ? value.flatMap((v, i) => unnamedFields(s.items!, v, `${at}/${i}`)) : [];
      const extra = s.additionalProperties;
      if (value === null || typeof value !== 'object' || (!s.properties && typeof extra !== 'object'))
        return [];
      return Object.entries(value).flatMap(([key, v]) => {
        const named = s.properties?.[key] ?? (typeof extra === 'object' ? extra : undefined);
        if (named) return unnamedFields(named, v, `${at}/${key}`);
        return extra === true ? [] : [`${at}/${key} is not in the schema`];
      });
    };

    // OpenAPI 3.0 schemas carry keywords JSON Schema does not know (`example`): not strict. Ajv knows `nullable`.
    let ajv: Ajv | undefined;
    /** What is wrong with `body` as an instance of `schema`: a `$ref` to the document's schemas, or inline. */
    const conformance = (schema: FieldsSchema, body: unknown): string[] => {
      if (!ajv) {
        ajv = new Ajv({ strict: false, allErrors: true });
        ajv.addFormat('date-time', (v: string) => ISO_TIMESTAMP.test(v) && !Number.isNaN(Date.parse(v)));
        ajv.addSchema({ components: { schemas: document.components.schemas } }, 'document');
      }
      const label = schema.$ref ?? 'inline schema';
      // Inline schemas reach the document's schemas through it.
      const inDocument = JSON.parse(
        JSON.stringify(schema).replaceAll('"#/components/', '"document#/components/'),
      );
      const validate =
        (schema.$ref && ajv.getSchema(`document${schema.$ref}`)) || ajv.compile(inDocument as object);
      const errors = validate(body) ? [] : (validate.errors ?? []);
      // An `anyOf` that fails reports every variant's errors: those under a deeper path say what is wrong.
      const deepest = errors.filter(
        (e) => !errors.some((other) => other.instancePath.startsWith(`${e.instancePath}/`)),
      );
      const messages = deepest.map((e) => `${label} ${e.instancePath || '/'} ${e.message ?? ''}`);
      return [...new Set(messages), ...unnamedFields(schema, body, label)];
    };

    it('publishes none of the engine’s env schema classes', () => {
      const names = Object.keys(document.components.schemas);
      expect(names).not.toContain('EngineEnv');
      for (const schema of ENGINE_ENV_SCHEMAS) expect(names).not.toContain(schema.name);
      expect(names.filter((n) => n.endsWith('Env'))).toEqual([]);
    });

    it('resolves every $ref to a published component, and publishes only schemas and headers something refers to', () => {
      const refs = new Set<string>();
      const walk = (node: unknown): void => {
        if (Array.isArray(node)) node.forEach(walk);
        else if (node !== null && typeof node === 'object') {
          for (const [key, value] of Object.entries(node)) {
            if (key === '$ref') refs.add(value as string);
            else walk(value);
          }
        }
      };
      walk(document);
      expect(refs.size).toBeGreaterThan(0);
      // Each ref names a published component (`#/components/<kind>/<name>`: schemas, and headers such as the 401's
      // WWW-Authenticate), and every published component is referred to.
      const components = document.components as Record<string, Record<string, unknown>>;
      const unresolved = [...refs].filter((ref) => {
        const [, kind, name] = /^#\/components\/([^/]+)\/([^/]+)$/.exec(ref) ?? [];
        return kind === undefined || !(name in (components[kind] ?? {}));
      });
      expect(unresolved).toEqual([]);
      // (Security schemes are named by `security`, not by a $ref.)
      const published = ['schemas', 'headers'].flatMap((kind) =>
        Object.keys(components[kind] ?? {}).map((name) => `#/components/${kind}/${name}`),
      );
      expect(published.filter((ref) => !refs.has(ref))).toEqual([]);
      expect(Object.keys(components.schemas).length).toBeGreaterThan(0);
      expect(Object.keys(document.paths).length).toBeGreaterThan(0);
    });

    it('describes the API keys as opaque bearer tokens and names a server', () => {
      const bearer = document.components.securitySchemes?.bearer;
      expect(bearer).toMatchObject({ type: 'http', scheme: 'bearer' });
      expect(bearer).not.toHaveProperty('bearerFormat'); // keys are opaque, not JWTs
      expect(document.servers).toEqual([expect.objectContaining({ url: '/' })]);
    });

    /** Every operation as `METHOD /path`, with the operation. */
    const operations = (): Array<[string, Operation]> =>
      Object.entries(document.paths).flatMap(([p, ops]) =>
        Object.entries(ops).map(([method, op]): [string, Operation] => [`${method.toUpperCase()} ${p}`, op]),
      );

    it('documents a success status and ErrorResponse errors for every operation', () => {
      expect(operations().length).toBeGreaterThan(30);
      const problems = operations().flatMap(([name, op]) => {
        const statuses = Object.keys(op.responses);
        const errors = statuses.filter((s) => /^[45]\d\d$/.test(s));
        const errorRefs = errors.filter(
          (s) => op.responses[s].content?.['application/json']?.schema?.$ref === ERROR_REF,
        );
        return [
          ...(statuses.some((s) => /^2\d\d$/.test(s)) ? [] : [`${name}: no 2xx`]),
          ...(errorRefs.length > 0 ? [] : [`${name}: no error response with ErrorResponse`]),
        ];
      });
      expect(problems).toEqual([]);
      // Its shape is api-responses.ts's to say; real error answers are validated against it below.
      expect(document.components.schemas.ErrorResponse).toMatchObject({
        type: 'object',
        required: expect.any(Array),
        properties: expect.any(Object),
      });
    });

    it('links the stateful flow to operations that exist, filling each of their path parameters', () => {
      const byId = new Map(operations().map(([name, op]) => [op.operationId, [name, op] as const]));
      const links = operations().flatMap(([name, op]) =>
        Object.entries(op.responses).flatMap(([status, response]) =>
          Object.entries(response.links ?? {}).map(([link, l]) => [`${name} ${status} ${link}`, l] as const),
        ),
      );
      expect(links.map(([name]) => name)).toEqual(
        expect.arrayContaining([
          'POST /v1/sessions 201 GetSession',
          'POST /v1/sessions 201 RunAction',
          'POST /v1/sessions/{sessionId}/actions 200 GetAction',
          'POST /v1/sessions/{sessionId}/actions 200 RetryAction',
          'POST /v1/sessions/{sessionId}/actions 200 GetFailureContext',
          'POST /v1/sessions/{sessionId}/actions 200 GetFileLineage',
          'POST /v1/sessions/{sessionId}/actions 202 GetAction',
          'GET /v1/sessions/{sessionId}/actions/{actionId} 200 GetFailureContext',
          'GET /v1/sessions/{sessionId}/actions/{actionId} 200 GetFileLineage',
          'POST /v1/sessions/{sessionId}/plans 202 GetPlan',
          'POST /v1/sessions/{sessionId}/fork 201 GetSession',
        ]),
      );
      const problems = links.flatMap(([name, link]) => {
        const target = byId.get(link.operationId);
        if (!target) return [`${name}: no operation ${link.operationId}`];
        const [targetName, targetOp] = target;
        const pathParams = [...targetName.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
        // `query.path` names a query parameter; a bare name (or `path.x`) a path parameter.
        const given = Object.keys(link.parameters ?? {});
        const givenPath = given.filter((k) => !k.startsWith('query.')).map((k) => k.replace(/^path\./, ''));
        const givenQuery = given.filter((k) => k.startsWith('query.')).map((k) => k.slice('query.'.length));
        const query = (targetOp.parameters ?? []).filter((p) => p.in === 'query');
        const missingQuery = query
          .filter((p) => p.required && !givenQuery.includes(p.name))
          .map((p) => p.name);
        const unknownQuery = givenQuery.filter((q) => !query.some((p) => p.name === q));
        const bad = Object.values(link.parameters ?? {}).filter(
          (v) => !/^\$(response\.body#(\/\w+)+|request\.path\.\w+)$/.test(v),
        );
        return [
          ...(givenPath.sort().join() === pathParams.join()
            ? []
            : [`${name}: fills ${givenPath.join()} of ${pathParams.join()}`]),
          ...missingQuery.map((q) => `${name}: leaves the required query parameter ${q} out`),
          ...unknownQuery.map((q) => `${name}: ${targetName} has no query parameter ${q}`),
          ...bad.map((v) => `${name}: ${v} is not a body or path expression`),
        ];
      });
      expect(problems).toEqual([]);
    });

    it('types every query parameter', () => {
      const queries = operations().flatMap(([name, op]) =>
        (op.parameters ?? []).filter((p) => p.in === 'query').map((p) => [name, p] as const),
      );
      expect(queries.length).toBeGreaterThanOrEqual(12);
      expect(queries.filter(([, p]) => !p.schema?.type).map(([name, p]) => `${name} ?${p.name}`)).toEqual([]);
      const lineage = document.paths['/v1/sessions/{sessionId}/files/lineage'].get.parameters;
      expect(lineage).toContainEqual(expect.objectContaining({ name: 'path', in: 'query', required: true }));
    });

    it('documents the status of every answer the engine gives (a table of real requests)', async () => {
      const send = async (
        method: string,
        urlPath: string,
        body?: unknown,
        contentType?: string,
      ): Promise<Answer> => {
        const res = await fetch(`${engine.baseUrl}${urlPath}`, {
          method,
          headers: body === undefined ? {} : { 'content-type': contentType ?? 'application/json' },
          body:
            body === undefined
              ? undefined
              : typeof body === 'string' || Buffer.isBuffer(body)
                ? body
                : JSON.stringify(body),
        });
        const text = await res.text();
        const json = res.headers.get('content-type')?.startsWith('application/json') && text !== '';
        return { status: res.status, body: json ? JSON.parse(text) : text };
      };
      /** A row whose request was sent before the table, because later rows need what it made. */
      const sent = (answer: Answer) => () => Promise.resolve(answer);
      const idOf = (answer: Answer): string => (answer.body as { id: string }).id;
      const sid = await engine.createSession();
      const s = `/v1/sessions/${sid}`;
      const checkpoint = await engine.request<{ id: string }>('POST', `${s}/checkpoints`, {});
      const doomed = await engine.createSession();
      const failed = await engine.request<{ id: string; status: string }>('POST', `${s}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'echo out; echo err >&2; exit 3',
      });
      expect(failed.body.status).toBe('failed');
      const a = `${s}/actions/${failed.body.id}`;
      // Its own session, so that the table's actions do not queue behind it.
      const slowSession = `/v1/sessions/${await engine.createSession()}`;
      const slow = await engine.request<{ id: string }>('POST', `${slowSession}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'sleep 30',
        wait: false,
      });

      // What the rows act on: a python kernel, two background processes, a file written by an action (checkpointed
      // first, so that a retry can restore), and an edit of it (a failure context with an earlier writer).
      const act = (body: Record<string, unknown>): Promise<Answer> => send('POST', `${s}/actions`, body);
      const oneFileTar = await new Promise<Buffer>((resolve, reject) => {
        const pack = tar.pack();
        const chunks: Buffer[] = [];
        pack.on('data', (c: Buffer) => chunks.push(c));
        pack.on('end', () => resolve(Buffer.concat(chunks)));
        pack.on('error', reject);
        pack.entry({ name: 'hello.txt' }, 'hello\n');
        pack.finalize();
      });
      const cell = await act({
        type: 'code',
        language: 'python',
        code: 'x = 41\nx + 1',
        state: 'session',
        tier: 'subprocess',
      });
      const kernel = `${s}/kernels/${(cell.body as { output: { kernel: { id: string } } }).output.kernel.id}`;
      // A Jupyter kernel of node, which no other row uses: deleting it stops no kernel the rows need.
      const jupyterStarted = await send('POST', `${s}/jupyter/api/kernels`, { name: 'javascript' });
      const jupyterKernel = `${s}/jupyter/api/kernels/${idOf(jupyterStarted)}`;
      const start = (name: string, command: string): Promise<Answer> =>
        act({ type: 'process', op: 'start', command, name, tier: 'subprocess' });
      await start('echo', 'cat');
      // A server, for the ports rows (docs/ports.md): listed once its socket listens.
      await start('web', 'python3 -m http.server 18765 --bind 127.0.0.1');
      const sleeper = await start('sleeper', 'sleep 30');
      const write = await act({
        type: 'file',
        op: 'write',
        path: 'notes/todo.txt',
        content: 'one\ntwo\n',
        checkpoint: 'before',
      });
      const edit = await act({
        type: 'file',
        op: 'edit',
        path: 'notes/todo.txt',
        find: 'two',
        replace: 'three',
      });
      const processOp =
        (op: string, processId: string, extra: Record<string, unknown> = {}) =>
        () =>
          act({ type: 'process', op, processId, ...extra });
      const file =
        (op: string, extra: Record<string, unknown> = {}) =>
        () =>
          act({ type: 'file', op, ...extra });

      // Plans, in a session of their own: one that needs a replan and gets one (restoring its step's checkpoint),
      // one replanned without waiting, and one still running when it is cancelled.
      const ps = `/v1/sessions/${await engine.createSession()}`;
      const failing = { language: 'bash', type: 'code', code: 'echo no >&2; exit 1' };
      const stuck = await send('POST', `${ps}/plans`, {
        goal: 'build it',
        checkpoints: 'each-step',
        steps: [{ id: 'build', action: failing }],
        wait: true,
      });
      const replanned = await send('POST', `${ps}/plans/${idOf(stuck)}/replan`, {
        steps: [{ id: 'build', action: { type: 'code', language: 'bash', code: 'true' } }],
        restoreTo: 'build',
        wait: true,
      });
      const second = await send('POST', `${ps}/plans`, {
        steps: [{ id: 'build', action: failing }],
        wait: true,
      });
      const resumed = await send('POST', `${ps}/plans/${idOf(second)}/replan`, {
        steps: [{ id: 'build', action: { type: 'code', language: 'bash', code: 'sleep 1' } }],
      });
      const running = await send('POST', `${ps}/plans`, {
        steps: [
          { id: 'wait', action: { type: 'code', language: 'bash', code: 'sleep 30' } },
          { id: 'then', action: { type: 'file', op: 'list' }, dependsOn: ['wait'] },
        ],
      });

      // Approvals: a session whose rule asks about every action, one to approve and one to reject. Skills: one added
      // for the (open) tenant, called as an action. Hooks: none configured, so their lists are empty but real.
      const asked = `/v1/sessions/${await engine.createSession({ policy: { rules: [{ effect: 'ask', match: {} }] } })}`;
      const toApprove = await send('POST', `${asked}/actions`, { type: 'file', op: 'list' });
      const toReject = await send('POST', `${asked}/actions`, { type: 'file', op: 'list' });
      const skill = {
        name: 'echo-back',
        description: 'Answers its input',
        inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        outputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'] },
        language: 'python',
        code: 'def main(input, ctx):\n    return {"text": input["text"]}\n',
      };
      const tenantPolicy = '/v1/tenants/open/policy';
      // Terminals: one to drive and close, one held for approval (the ask-everything session), and one whose close a
      // rule holds for approval.
      const terminal = await send('POST', `${s}/terminals`, { cols: 100, rows: 30 });
      const t = `${s}/terminals/${idOf(terminal)}`;
      const heldTerminal = await send('POST', `${asked}/terminals`, {});
      const closeAsked = `/v1/sessions/${await engine.createSession({
        policy: { rules: [{ effect: 'ask', match: { tool: 'terminal_close' } }] },
      })}`;
      const kept = await send('POST', `${closeAsked}/terminals`, {});

      let listening = await send('GET', `${s}/ports`);
      for (let polls = 0; polls < 300; polls++) {
        if ((listening.body as { ports: Array<{ port: number }> }).ports.some((p) => p.port === 18765)) break;
        await new Promise((resolve) => setTimeout(resolve, 100));
        listening = await send('GET', `${s}/ports`);
      }

      type Row = [string, string, string, () => Promise<Answer>, number | number[]];
      const get = (urlPath: string) => () => send('GET', urlPath);
      const post = (urlPath: string, body?: unknown) => () => send('POST', urlPath, body);
      const SESSION = '/v1/sessions/{sessionId}';
      const ACTIONS = `${SESSION}/actions`;
      const ACTION = `${ACTIONS}/{actionId}`;
      const CHECKPOINT = `${SESSION}/checkpoints/{checkpointId}`;
      const KERNEL = `${SESSION}/kernels/{kernelId}`;
      const JUPYTER = `${SESSION}/jupyter/api`;
      const JUPYTER_KERNEL = `${JUPYTER}/kernels/{kernelId}`;
      const PLANS = `${SESSION}/plans`;
      const TERMINALS = `${SESSION}/terminals`;
      const TERMINAL = `${TERMINALS}/{terminalId}`;
      const PLAN = `${PLANS}/{planId}`;
      const table: Row[] = [
        ['create session', 'POST', '/v1/sessions', post('/v1/sessions', {}), 201],
        ['list sessions', 'GET', '/v1/sessions', get('/v1/sessions'), 200],
        ['describe session', 'GET', SESSION, get(s), 200],
        // Actions of every type, and what follows from them.
        ['kernel cell', 'POST', ACTIONS, sent(cell), 200],
        ['file write, checkpointed first', 'POST', ACTIONS, sent(write), 200],
        ['file edit', 'POST', ACTIONS, sent(edit), 200],
        ['file read', 'POST', ACTIONS, file('read', { path: 'notes/todo.txt' }), 200],
        ['file stat', 'POST', ACTIONS, file('stat', { path: 'notes' }), 200],
        ['file list', 'POST', ACTIONS, file('list', { recursive: true }), 200],
        ['file find', 'POST', ACTIONS, file('find', { pattern: '**/*.txt' }), 200],
        ['file grep', 'POST', ACTIONS, file('grep', { pattern: 'th' }), 200],
        ['file mkdir', 'POST', ACTIONS, file('mkdir', { path: 'out' }), 200],
        ['file move', 'POST', ACTIONS, file('move', { path: 'notes/todo.txt', to: 'out/done.txt' }), 200],
        ['file delete', 'POST', ACTIONS, file('delete', { path: 'out/done.txt' }), 200],
        // File transfer: raw bytes up and down, a directory as a tar up and down.
        [
          'upload a file',
          'PUT',
          `${SESSION}/files/content`,
          () =>
            send(
              'PUT',
              `${s}/files/content?path=up/bytes.bin`,
              Buffer.from([0, 1, 2, 255]),
              'application/octet-stream',
            ),
          200,
        ],
        [
          'download a file',
          'GET',
          `${SESSION}/files/content`,
          get(`${s}/files/content?path=up/bytes.bin`),
          200,
        ],
        [
          'upload an archive',
          'PUT',
          `${SESSION}/files/archive`,
          () => send('PUT', `${s}/files/archive?path=up/tree`, oneFileTar, 'application/x-tar'),
          200,
        ],
        [
          'download an archive',
          'GET',
          `${SESSION}/files/archive`,
          get(`${s}/files/archive?path=up/tree`),
          200,
        ],
        [
          'lineage of the written file',
          'GET',
          `${SESSION}/files/lineage`,
          get(`${s}/files/lineage?path=notes/todo.txt`),
          200,
        ],
        [
          'failure context of the edit',
          'GET',
          `${ACTION}/context`,
          get(`${s}/actions/${idOf(edit)}/context`),
          200,
        ],
        [
          'failure context of a failed code action',
          'GET',
          `${ACTION}/context`,
          get(`${a}/context?before=2`),
          200,
        ],
        [
          'retry of the write, restoring its checkpoint',
          'POST',
          `${ACTION}/retry`,
          post(`${s}/actions/${idOf(write)}/retry`, { restore: true }),
          200,
        ],
        ['process start', 'POST', ACTIONS, sent(sleeper), 200],
        ['process list', 'POST', ACTIONS, () => act({ type: 'process', op: 'list' }), 200],
        ['process write', 'POST', ACTIONS, processOp('write', 'echo', { data: 'hello\n', eof: true }), 200],
        ['process wait', 'POST', ACTIONS, processOp('wait', 'echo', { timeoutMs: 10_000 }), 200],
        ['process logs', 'POST', ACTIONS, processOp('logs', 'echo'), 200],
        ['process signal', 'POST', ACTIONS, processOp('signal', 'sleeper', { signal: 'TERM' }), 200],
        ['process stop', 'POST', ACTIONS, processOp('stop', 'sleeper'), 200],
        [
          'browser navigate',
          'POST',
          ACTIONS,
          () => act({ type: 'browser', op: 'navigate', url: site.url('/') }),
          200,
        ],
        [
          'browser extract',
          'POST',
          ACTIONS,
          () => act({ type: 'browser', op: 'extract', mode: 'links' }),
          200,
        ],
        ['kernels', 'GET', `${SESSION}/kernels`, get(`${s}/kernels`), 200],
        ['kernel', 'GET', KERNEL, get(kernel), 200],
        ['interrupt an idle kernel', 'POST', `${KERNEL}/interrupt`, post(`${kernel}/interrupt`), 200],
        ['restart a kernel', 'POST', `${KERNEL}/restart`, post(`${kernel}/restart`), 200],
        [
          'kernel action',
          'POST',
          ACTIONS,
          () => act({ type: 'kernel', op: 'restart', language: 'python' }),
          200,
        ],
        [
          'kernel action without a kernel',
          'POST',
          ACTIONS,
          () => act({ type: 'kernel', op: 'restart', language: 'node' }),
          200,
        ],
        ['unknown kernel', 'GET', KERNEL, get(`${s}/kernels/krn_000000000000000000000000`), 404],
        // Terminals (docs/terminals.md): their WebSocket is not a REST route, the rest is.
        ['open a terminal', 'POST', TERMINALS, sent(terminal), 201],
        ['terminal held for approval', 'POST', TERMINALS, sent(heldTerminal), 202],
        ['terminals', 'GET', TERMINALS, get(`${s}/terminals`), 200],
        ['terminal', 'GET', TERMINAL, get(t), 200],
        [
          'resize a terminal',
          'POST',
          `${TERMINAL}/resize`,
          post(`${t}/resize`, { cols: 120, rows: 40 }),
          200,
        ],
        ['terminal token', 'POST', `${TERMINAL}/token`, post(`${t}/token`, { ttlSeconds: 60 }), 200],
        [
          'terminal close held for approval',
          'DELETE',
          TERMINAL,
          () => send('DELETE', `${closeAsked}/terminals/${idOf(kept)}`),
          202,
        ],
        ['close a terminal', 'DELETE', TERMINAL, () => send('DELETE', t), 200],
        ['close a closed terminal', 'DELETE', TERMINAL, () => send('DELETE', t), 409],
        ['unknown terminal', 'GET', TERMINAL, get(`${s}/terminals/trm_0000000000000000`), 404],
        // Ports (docs/ports.md): the proxy is not a REST route of the document, its list and previews are.
        ['ports', 'GET', `${SESSION}/ports`, sent(listening), 200],
        [
          'preview a port',
          'POST',
          `${SESSION}/ports/{port}/preview`,
          post(`${s}/ports/18765/preview`, { ttlSeconds: 60 }),
          201,
        ],
        [
          'preview a privileged port',
          'POST',
          `${SESSION}/ports/{port}/preview`,
          post(`${s}/ports/22/preview`, {}),
          400,
        ],
        // The Jupyter protocol's REST half (docs/jupyter.md).
        ['jupyter kernelspecs', 'GET', `${JUPYTER}/kernelspecs`, get(`${s}/jupyter/api/kernelspecs`), 200],
        [
          'jupyter kernelspec',
          'GET',
          `${JUPYTER}/kernelspecs/{name}`,
          get(`${s}/jupyter/api/kernelspecs/javascript`),
          200,
        ],
        ['start a jupyter kernel', 'POST', `${JUPYTER}/kernels`, sent(jupyterStarted), 201],
        ['jupyter kernels', 'GET', `${JUPYTER}/kernels`, get(`${s}/jupyter/api/kernels`), 200],
        ['jupyter kernel', 'GET', JUPYTER_KERNEL, get(jupyterKernel), 200],
        [
          'interrupt a jupyter kernel',
          'POST',
          `${JUPYTER_KERNEL}/interrupt`,
          post(`${jupyterKernel}/interrupt`),
          204,
        ],
        [
          'restart a jupyter kernel',
          'POST',
          `${JUPYTER_KERNEL}/restart`,
          post(`${jupyterKernel}/restart`),
          200,
        ],
        ['delete a jupyter kernel', 'DELETE', JUPYTER_KERNEL, () => send('DELETE', jupyterKernel), 204],
        ['deleted jupyter kernel', 'GET', JUPYTER_KERNEL, get(jupyterKernel), 404],
        // Checkpoints, while the kernel and a process keep running (the restore says so).
        ['list checkpoints', 'GET', `${SESSION}/checkpoints`, get(`${s}/checkpoints`), 200],
        ['one checkpoint', 'GET', CHECKPOINT, get(`${s}/checkpoints/${checkpoint.body.id}`), 200],
        [
          'diff to now',
          'GET',
          `${CHECKPOINT}/diff`,
          get(`${s}/checkpoints/${checkpoint.body.id}/diff?to=current`),
          200,
        ],
        [
          'restore',
          'POST',
          `${CHECKPOINT}/restore`,
          post(`${s}/checkpoints/${checkpoint.body.id}/restore`),
          200,
        ],
        [
          'fork at a checkpoint',
          'POST',
          `${SESSION}/fork`,
          post(`${s}/fork`, { checkpointId: checkpoint.body.id }),
          201,
        ],
        ['checkpoint', 'POST', `${SESSION}/checkpoints`, post(`${s}/checkpoints`, { label: 'later' }), 201],
        ['unknown checkpoint', 'GET', CHECKPOINT, get(`${s}/checkpoints/chk_000000000000000000000000`), 404],
        // Plans.
        ['plan that needs a replan', 'POST', PLANS, sent(stuck), 200],
        ['replan, waited for', 'POST', `${PLAN}/replan`, sent(replanned), 200],
        ['replan, not waited for', 'POST', `${PLAN}/replan`, sent(resumed), 202],
        ['plan, not waited for', 'POST', PLANS, sent(running), 202],
        ['plans', 'GET', PLANS, get(`${ps}/plans`), 200],
        ['one plan', 'GET', PLAN, get(`${ps}/plans/${idOf(replanned)}`), 200],
        ['cancel a plan', 'POST', `${PLAN}/cancel`, post(`${ps}/plans/${idOf(running)}/cancel`), 200],
        [
          'cancel an ended plan',
          'POST',
          `${PLAN}/cancel`,
          post(`${ps}/plans/${idOf(replanned)}/cancel`),
          409,
        ],
        [
          'invalid plan',
          'POST',
          PLANS,
          post(`${ps}/plans`, { steps: [{ id: 'x', action: { type: 'code' } }] }),
          400,
        ],
        ['graph of the plans', 'GET', `${SESSION}/graph`, get(`${ps}/graph`), 200],
        // The actions of the first table.
        ['failed action, as recorded', 'GET', ACTION, get(a), 200],
        ['retry', 'POST', `${ACTION}/retry`, post(`${a}/retry`, { reason: 'again' }), 200],
        ['wait:false retry', 'POST', `${ACTION}/retry`, post(`${a}/retry`, { wait: false }), 202],
        ['cancel', 'POST', `${ACTION}/cancel`, post(`${slowSession}/actions/${slow.body.id}/cancel`), 200],
        ['cancel an ended action', 'POST', `${ACTION}/cancel`, post(`${a}/cancel`), 409],
        [
          'sync code action',
          'POST',
          ACTIONS,
          post(`${s}/actions`, { type: 'code', language: 'bash', code: 'echo hi' }),
          200,
        ],
        [
          'wait:false action',
          'POST',
          ACTIONS,
          post(`${s}/actions`, { type: 'code', language: 'bash', code: 'true', wait: false }),
          202,
        ],
        [
          'action on an unknown session',
          'POST',
          ACTIONS,
          post('/v1/sessions/ses_000000000000000000000000/actions', { type: 'code' }),
          404,
        ],
        [
          'invalid action body',
          'POST',
          ACTIONS,
          post(`${s}/actions`, { type: 'code', language: 'cobol' }),
          400,
        ],
        [
          'text/plain body',
          'POST',
          ACTIONS,
          () => send('POST', `${s}/actions`, 'echo hi', 'text/plain'),
          415,
        ],
        ['unknown session', 'GET', SESSION, get('/v1/sessions/ses_x'), 404],
        ['actions page', 'GET', ACTIONS, get(`${s}/actions?limit=5`), 200],
        ['bad page size', 'GET', ACTIONS, get(`${s}/actions?limit=0`), 400],
        ['lineage without path', 'GET', `${SESSION}/files/lineage`, get(`${s}/files/lineage`), 400],
        ['graph', 'GET', `${SESSION}/graph`, get(`${s}/graph?types=code,file`), 200],
        ['whole graph', 'GET', `${SESSION}/graph`, get(`${s}/graph`), 200],
        // Tools, templates and the probes.
        ['tools', 'GET', '/v1/tools', get('/v1/tools'), 200],
        ['openai tools', 'GET', '/v1/tools', get('/v1/tools?format=openai'), 200],
        ['strict tools', 'GET', '/v1/tools', get('/v1/tools?format=openai&strict=true'), 200],
        ['bad tools format', 'GET', '/v1/tools', get('/v1/tools?format=gemini'), 400],
        [
          'tool call',
          'POST',
          `${SESSION}/tool-calls`,
          post(`${s}/tool-calls`, { id: 'c1', name: 'ls', input: {} }),
          200,
        ],
        [
          'tool calls of both APIs',
          'POST',
          `${SESSION}/tool-calls`,
          post(`${s}/tool-calls`, [
            { type: 'tool_use', id: 'toolu_1', name: 'ls', input: { path: 'nowhere' } },
            { id: 'call_2', type: 'function', function: { name: 'find', arguments: '{"pattern":"*"}' } },
          ]),
          200,
        ],
        ['templates', 'GET', '/v1/templates', get('/v1/templates'), 200],
        ['health', 'GET', '/health', get('/health'), 200],
        ['liveness', 'GET', '/health/live', get('/health/live'), 200],
        // 503 where a dependency (Docker, Chromium…) is missing: then its 200 cannot be checked here.
        ['readiness', 'GET', '/health/ready', get('/health/ready'), [200, 503]],
        ['metrics', 'GET', '/metrics', get('/metrics'), 200],
        // Policies, approvals, skills and hooks.
        ['who calls', 'GET', '/v1/whoami', get('/v1/whoami'), 200],
        ['session policy', 'GET', `${SESSION}/policy`, get(`${asked}/policy`), 200],
        ['tenant policy', 'GET', '/v1/tenants/{tenant}/policy', get(tenantPolicy), 200],
        [
          'set tenant policy',
          'PUT',
          '/v1/tenants/{tenant}/policy',
          () => send('PUT', tenantPolicy, { rules: [{ effect: 'deny', match: { tool: 'browser_pdf' } }] }),
          200,
        ],
        [
          'remove tenant policy',
          'DELETE',
          '/v1/tenants/{tenant}/policy',
          () => send('DELETE', tenantPolicy),
          204,
        ],
        ['action awaiting approval', 'POST', ACTIONS, sent(toApprove), 202],
        ['approvals', 'GET', '/v1/approvals', get('/v1/approvals'), 200],
        [
          'approve',
          'POST',
          `${ACTION}/approve`,
          post(`${asked}/actions/${idOf(toApprove)}/approve`, {}),
          200,
        ],
        [
          'reject',
          'POST',
          `${ACTION}/reject`,
          post(`${asked}/actions/${idOf(toReject)}/reject`, { reason: 'no' }),
          200,
        ],
        [
          'approve again',
          'POST',
          `${ACTION}/approve`,
          post(`${asked}/actions/${idOf(toApprove)}/approve`),
          409,
        ],
        ['add a skill', 'POST', '/v1/skills', post('/v1/skills', skill), 201],
        ['skills', 'GET', '/v1/skills', get('/v1/skills'), 200],
        ['one skill', 'GET', '/v1/skills/{name}', get('/v1/skills/echo-back'), 200],
        [
          'skill action',
          'POST',
          ACTIONS,
          () => act({ type: 'skill', name: 'echo-back', input: { text: 'hi' } }),
          200,
        ],
        ['remove a skill', 'DELETE', '/v1/skills/{name}', () => send('DELETE', '/v1/skills/echo-back'), 204],
        ['hooks', 'GET', '/v1/hooks', get('/v1/hooks'), 200],
        ['hook deliveries', 'GET', '/v1/hooks/deliveries', get('/v1/hooks/deliveries?limit=10'), 200],
        ['an action’s hook deliveries', 'GET', `${ACTION}/hooks`, get(`${a}/hooks`), 200],
        ['delete session', 'DELETE', SESSION, () => send('DELETE', `/v1/sessions/${doomed}`), 204],
      ];
      const unexpected: string[] = [];
      const undocumented: string[] = [];
      const invalid: string[] = [];
      const validated = new Set<string>();
      // Statuses a row allowed but did not get: their schemas cannot be checked against this engine's answers.
      const excused = new Set<string>();
      for (const [name, method, template, run, expected] of table) {
        const { status, body } = await run();
        const allowed = [expected].flat();
        if (!allowed.includes(status))
          unexpected.push(`${name}: answered ${status}, expected ${allowed.join(' or ')}`);
        for (const other of allowed) if (other !== status) excused.add(`${method} ${template} ${other}`);
        // An action row must have done what it names: an output schema checked against a refusal proves nothing.
        const outcome = (body as { status?: unknown } | undefined)?.status;
        if (method === 'POST' && template === ACTIONS && status === 200 && outcome !== 'succeeded')
          unexpected.push(`${name}: the action ended ${String(outcome)}`);
        const op = document.paths[template]?.[method.toLowerCase()];
        if (!op || !(String(status) in op.responses))
          undocumented.push(`${name}: ${method} ${template} ${status}`);
        // Success answers against their schema, inline or not; error answers against theirs when it is a `$ref`
        // (ErrorResponse: whatever the document says it is).
        const schema = op?.responses[String(status)]?.content?.['application/json']?.schema;
        if (schema === undefined || (status >= 400 && schema.$ref === undefined)) continue;
        if (schema.$ref !== undefined) validated.add(`${method} ${template} ${status}`);
        invalid.push(...conformance(schema, body).map((problem) => `${name}: ${problem}`));
      }
      expect(unexpected).toEqual([]);
      expect(undocumented).toEqual([]);
      expect(invalid).toEqual([]);
      // Every success body the document names a schema for is checked against a real answer above.
      const named = operations().flatMap(([name, op]) =>
        Object.entries(op.responses)
          .filter(([st, r]) => /^2/.test(st) && r.content?.['application/json']?.schema?.$ref)
          .map(([st]) => `${name} ${st}`),
      );
      expect(named.filter((n) => !validated.has(n) && !excused.has(n))).toEqual([]);
    }, 180_000);
  });
});
