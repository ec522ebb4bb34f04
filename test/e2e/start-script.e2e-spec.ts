import { execFileSync } from 'node:child_process';
import { statSync } from 'node:fs';
import * as path from 'node:path';

const ROOT = path.resolve(__dirname, '../..');
const MAIN = path.join(ROOT, 'dist/apps/engine/src/main.js');

describe('npm start', () => {
  it('does not wipe and rebuild dist/ when the sources are unchanged since the last build', () => {
    // `npm test` built dist/ (through the same script) before the tests: a start now must reuse it as it is, so an
    // engine already running from this checkout keeps its files.
    const before = statSync(MAIN).mtimeMs;
    const out = execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--if-changed'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(out).toContain('sources unchanged');
    expect(statSync(MAIN).mtimeMs).toBe(before);
  });
});
