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
      paths: Record<string, unknown>;
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
  });
});
