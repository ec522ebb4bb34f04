// `npm run client:generate`: writes the engine's OpenAPI document to packages/client/openapi.json and the client's
// types from it to packages/client/src/generated/schema.ts. Runs on the built engine (`npm run build` first): the
// app is created but never listens. test/e2e/client-openapi.e2e-spec.ts fails when the checked-in document is stale.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import * as os from 'node:os';
import * as path from 'node:path';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '..');
const require = createRequire(import.meta.url);
const built = (p) => path.join(root, 'dist', 'apps', 'engine', 'src', p);
const { createEngineApp } = require(built('bootstrap.js'));
const { loadEngineConfig } = require(built('platform/config/engine-config.js'));
const { buildOpenApiDocument } = require(built('edge/http/openapi.js'));

const documentPath = path.join(root, 'packages', 'client', 'openapi.json');
const schemaPath = path.join(root, 'packages', 'client', 'src', 'generated', 'schema.ts');

const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-openapi-'));
try {
  // The same fixed settings as the drift check: the document must not depend on this machine's environment.
  const config = loadEngineConfig({ SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_LOG_LEVEL: 'error' });
  const app = await createEngineApp(config, { logStream: process.stderr });
  try {
    writeFileSync(documentPath, `${JSON.stringify(buildOpenApiDocument(app), null, 2)}\n`);
  } finally {
    await app.close();
  }
} finally {
  rmSync(dataDir, { recursive: true, force: true });
}
execFileSync(
  path.join(root, 'node_modules', '.bin', 'openapi-typescript'),
  [documentPath, '-o', schemaPath],
  {
    cwd: root,
    stdio: 'inherit',
  },
);
console.log(`[openapi] wrote ${path.relative(root, documentPath)} and ${path.relative(root, schemaPath)}`);
