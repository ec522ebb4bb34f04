import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { buildOpenApiDocument } from '../../apps/engine/src/edge/http/openapi';
import { EngineHarness } from '../support/engine-harness';

// The client's types are generated from packages/client/openapi.json: a route or DTO changed without
// `npm run client:generate` fails here, so CI never ships a stale client.
describe('client OpenAPI document (drift check)', () => {
  let engine: EngineHarness;
  beforeAll(async () => {
    engine = await EngineHarness.start();
  });
  afterAll(() => engine?.stop());

  it('matches the engine document, which /docs-json serves unchanged', async () => {
    const checkedIn: unknown = JSON.parse(
      readFileSync(path.join(__dirname, '..', '..', 'packages', 'client', 'openapi.json'), 'utf8'),
    );
    const built = JSON.parse(JSON.stringify(buildOpenApiDocument(engine.app)));
    const served = await engine.request('GET', '/docs-json');
    expect(built).toEqual(checkedIn);
    expect(served.body).toEqual(checkedIn);
  });
});
