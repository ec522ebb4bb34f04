/**
 * The built engine as a real process (`npx nest build engine` first): a configuration it cannot use stops it with
 * exit 78 naming the variable, and its public OpenAPI document holds the API's schemas only. A bad PORT value is
 * covered by restart.e2e-spec.ts.
 */
import { mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ENGINE_ENV_SCHEMAS } from '../../apps/engine/src/config/engine-config';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';

const EX_CONFIG = 'exit 78';

interface Operation {
  responses: Record<string, { content?: Record<string, { schema?: { $ref?: string } }> }>;
  parameters?: Array<{ name: string; in: string; required?: boolean; schema?: { type?: string } }>;
}

const ERROR_REF = '#/components/schemas/ErrorResponse';

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
      const send = async (method: string, urlPath: string, body?: unknown, contentType?: string) => {
        const res = await fetch(`${engine.baseUrl}${urlPath}`, {
          method,
          headers: body === undefined ? {} : { 'content-type': contentType ?? 'application/json' },
          body: body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body),
        });
        await res.text();
        return res.status;
      };
      const sid = await engine.createSession();
      const s = `/v1/sessions/${sid}`;
      const checkpoint = await engine.request<{ id: string }>('POST', `${s}/checkpoints`, {});
      const doomed = await engine.createSession();
      const table: Array<[string, string, string, () => Promise<number>, number]> = [
        ['create session', 'POST', '/v1/sessions', () => send('POST', '/v1/sessions', {}), 201],
        ['list sessions', 'GET', '/v1/sessions', () => send('GET', '/v1/sessions'), 200],
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
      for (const [name, method, template, run, expected] of table) {
        const status = await run();
        if (status !== expected) unexpected.push(`${name}: answered ${status}, expected ${expected}`);
        const op = document.paths[template]?.[method.toLowerCase()];
        if (!op || !(String(status) in op.responses))
          undocumented.push(`${name}: ${method} ${template} ${status}`);
      }
      expect(unexpected).toEqual([]);
      expect(undocumented).toEqual([]);
    });
  });
});
