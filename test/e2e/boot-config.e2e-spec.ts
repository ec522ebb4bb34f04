/**
 * The built engine as a real process (`npx nest build engine` first): a configuration it cannot use stops it with
 * exit 78 naming the variable, and its public OpenAPI document holds the API's schemas only. A bad PORT value is
 * covered by restart.e2e-spec.ts.
 */
import Ajv from 'ajv';
import { mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ENGINE_ENV_SCHEMAS } from '../../apps/engine/src/config/engine-config';
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
    { content?: Record<string, { schema?: { $ref?: string } }>; links?: Record<string, Link> }
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
  items?: FieldsSchema;
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
    let document: {
      paths: Record<string, Record<string, Operation>>;
      servers?: Array<{ url: string }>;
      components: {
        schemas: Record<string, unknown>;
        securitySchemes?: Record<string, Record<string, unknown>>;
      };
    };
    beforeAll(async () => {
      engine = await EngineProcess.start(newDataDir(), await freePort(), { SWITCHYARD_POOL_MIN: '0' });
      const res = await engine.request<typeof document>('GET', '/docs-json');
      expect(res.status).toBe(200);
      document = res.body;
    });
    afterAll(() => engine?.stop('SIGTERM'));

    const schemaAt = (ref: string): FieldsSchema =>
      document.components.schemas[ref.slice('#/components/schemas/'.length)] as FieldsSchema;

    /** Fields of `value` that `schema` does not name (JSON Schema lets them through unless told otherwise). */
    const unnamedFields = (schema: FieldsSchema, value: unknown, at: string): string[] => {
      const s = schema.$ref ? schemaAt(schema.$ref) : schema;
      if (Array.isArray(value) && s.items)
        return value.flatMap((v, i) => unnamedFields(s.items!, v, `${at}/${i}`));
      if (value === null || typeof value !== 'object' || !s.properties) return [];
      return Object.entries(value).flatMap(([key, v]) =>
        s.properties![key]
          ? unnamedFields(s.properties![key], v, `${at}/${key}`)
          : [`${at}/${key} is not in the schema`],
      );
    };

    /** What is wrong with `body` as an instance of the document's schema `ref`. */
    const conformance = (ref: string, body: unknown): string[] => {
      // OpenAPI 3.0 schemas carry keywords JSON Schema does not know (`example`): not strict.
      const ajv = new Ajv({ strict: false, allErrors: true });
      ajv.addFormat('date-time', (v: string) => ISO_TIMESTAMP.test(v) && !Number.isNaN(Date.parse(v)));
      ajv.addSchema({ components: { schemas: document.components.schemas } }, 'document');
      const validate = ajv.compile({ $ref: `document${ref}` });
      const errors = validate(body)
        ? []
        : (validate.errors ?? []).map((e) => `${ref} ${e.instancePath || '/'} ${e.message ?? ''}`);
      return [...errors, ...unnamedFields({ $ref: ref }, body, ref)];
    };

    it('publishes none of the engine’s env schema classes', () => {
      const names = Object.keys(document.components.schemas);
      expect(names).not.toContain('EngineEnv');
      for (const schema of ENGINE_ENV_SCHEMAS) expect(names).not.toContain(schema.name);
      expect(names.filter((n) => n.endsWith('Env'))).toEqual([]);
    });

    it('resolves every $ref to a published schema, and publishes only schemas something refers to', () => {
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
      const schemas = document.components.schemas;
      const unresolved = [...refs].filter(
        (ref) =>
          !ref.startsWith('#/components/schemas/') || !(ref.slice('#/components/schemas/'.length) in schemas),
      );
      expect(unresolved).toEqual([]);
      const referenced = new Set([...refs].map((ref) => ref.slice('#/components/schemas/'.length)));
      expect(Object.keys(schemas).filter((name) => !referenced.has(name))).toEqual([]);
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
      expect(document.components.schemas.ErrorResponse).toMatchObject({
        required: ['statusCode', 'error', 'message'],
        properties: expect.objectContaining({
          code: expect.anything(),
          errors: expect.anything(),
          details: expect.anything(),
        }),
      });
    });

    it('links the stateful flow to operations that exist, filling each of their path parameters', () => {
      const byId = new Map(operations().map(([name, op]) => [op.operationId, name]));
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
          'POST /v1/sessions/{sessionId}/actions 202 GetAction',
        ]),
      );
      const problems = links.flatMap(([name, link]) => {
        const target = byId.get(link.operationId);
        if (!target) return [`${name}: no operation ${link.operationId}`];
        const pathParams = [...target.matchAll(/\{(\w+)\}/g)].map((m) => m[1]).sort();
        const given = Object.keys(link.parameters ?? {}).sort();
        const bad = Object.values(link.parameters ?? {}).filter(
          (v) => !/^\$(response\.body#\/|request\.path\.)\w+$/.test(v),
        );
        return [
          ...(given.join() === pathParams.join()
            ? []
            : [`${name}: fills ${given.join()} of ${pathParams.join()}`]),
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
          body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        });
        const text = await res.text();
        const json = res.headers.get('content-type')?.startsWith('application/json') && text !== '';
        return { status: res.status, body: json ? JSON.parse(text) : text };
      };
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
      const table: Array<[string, string, string, () => Promise<Answer>, number]> = [
        ['create session', 'POST', '/v1/sessions', () => send('POST', '/v1/sessions', {}), 201],
        ['list sessions', 'GET', '/v1/sessions', () => send('GET', '/v1/sessions'), 200],
        ['describe session', 'GET', '/v1/sessions/{sessionId}', () => send('GET', s), 200],
        [
          'failed action, as recorded',
          'GET',
          '/v1/sessions/{sessionId}/actions/{actionId}',
          () => send('GET', a),
          200,
        ],
        [
          'retry',
          'POST',
          '/v1/sessions/{sessionId}/actions/{actionId}/retry',
          () => send('POST', `${a}/retry`, { reason: 'again' }),
          200,
        ],
        [
          'wait:false retry',
          'POST',
          '/v1/sessions/{sessionId}/actions/{actionId}/retry',
          () => send('POST', `${a}/retry`, { wait: false }),
          202,
        ],
        [
          'cancel',
          'POST',
          '/v1/sessions/{sessionId}/actions/{actionId}/cancel',
          () => send('POST', `${slowSession}/actions/${slow.body.id}/cancel`),
          200,
        ],
        [
          'sync code action',
          'POST',
          '/v1/sessions/{sessionId}/actions',
          () => send('POST', `${s}/actions`, { type: 'code', language: 'bash', code: 'echo hi' }),
          200,
        ],
        [
          'wait:false action',
          'POST',
          '/v1/sessions/{sessionId}/actions',
          () => send('POST', `${s}/actions`, { type: 'code', language: 'bash', code: 'true', wait: false }),
          202,
        ],
        [
          'action on an unknown session',
          'POST',
          '/v1/sessions/{sessionId}/actions',
          () => send('POST', '/v1/sessions/ses_000000000000000000000000/actions', { type: 'code' }),
          404,
        ],
        [
          'invalid action body',
          'POST',
          '/v1/sessions/{sessionId}/actions',
          () => send('POST', `${s}/actions`, { type: 'code', language: 'cobol' }),
          400,
        ],
        [
          'text/plain body',
          'POST',
          '/v1/sessions/{sessionId}/actions',
          () => send('POST', `${s}/actions`, 'echo hi', 'text/plain'),
          415,
        ],
        ['unknown session', 'GET', '/v1/sessions/{sessionId}', () => send('GET', '/v1/sessions/ses_x'), 404],
        [
          'actions page',
          'GET',
          '/v1/sessions/{sessionId}/actions',
          () => send('GET', `${s}/actions?limit=5`),
          200,
        ],
        [
          'bad page size',
          'GET',
          '/v1/sessions/{sessionId}/actions',
          () => send('GET', `${s}/actions?limit=0`),
          400,
        ],
        [
          'checkpoint',
          'POST',
          '/v1/sessions/{sessionId}/checkpoints',
          () => send('POST', `${s}/checkpoints`, {}),
          201,
        ],
        [
          'diff to now',
          'GET',
          '/v1/sessions/{sessionId}/checkpoints/{checkpointId}/diff',
          () => send('GET', `${s}/checkpoints/${checkpoint.body.id}/diff?to=current`),
          200,
        ],
        [
          'lineage without path',
          'GET',
          '/v1/sessions/{sessionId}/files/lineage',
          () => send('GET', `${s}/files/lineage`),
          400,
        ],
        [
          'graph',
          'GET',
          '/v1/sessions/{sessionId}/graph',
          () => send('GET', `${s}/graph?types=code,file`),
          200,
        ],
        ['tools', 'GET', '/v1/tools', () => send('GET', '/v1/tools?format=openai&strict=true'), 200],
        ['bad tools format', 'GET', '/v1/tools', () => send('GET', '/v1/tools?format=gemini'), 400],
        [
          'delete session',
          'DELETE',
          '/v1/sessions/{sessionId}',
          () => send('DELETE', `/v1/sessions/${doomed}`),
          204,
        ],
      ];
      const unexpected: string[] = [];
      const undocumented: string[] = [];
      const invalid: string[] = [];
      const validated = new Set<string>();
      for (const [name, method, template, run, expected] of table) {
        const { status, body } = await run();
        if (status !== expected) unexpected.push(`${name}: answered ${status}, expected ${expected}`);
        const op = document.paths[template]?.[method.toLowerCase()];
        if (!op || !(String(status) in op.responses))
          undocumented.push(`${name}: ${method} ${template} ${status}`);
        const ref = op?.responses[String(status)]?.content?.['application/json']?.schema?.$ref;
        if (ref === undefined || status >= 400) continue;
        validated.add(`${method} ${template} ${status}`);
        invalid.push(...conformance(ref, body).map((problem) => `${name}: ${problem}`));
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
      expect(named.filter((n) => !validated.has(n))).toEqual([]);
    });
  });
});
