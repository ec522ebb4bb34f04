import { spawnSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ENGINE_ENV_SCHEMAS } from './engine-env';

// docs/reference/configuration.md is generated from these classes; `npm run lint` runs the same --check.
const root = path.resolve(__dirname, '..', '..', '..', '..', '..');
const script = path.join(root, 'scripts', 'config-reference.mjs');

function run(...args: string[]): { status: number | null; stdout: string; stderr: string } {
  const result = spawnSync(process.execPath, [script, ...args], { cwd: root, encoding: 'utf8' });
  return { status: result.status, stdout: result.stdout, stderr: result.stderr };
}

describe('the configuration reference (scripts/config-reference.mjs)', () => {
  let generated: string;
  let tmp: string;

  beforeAll(() => {
    const result = run();
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
    generated = result.stdout;
    tmp = mkdtempSync(path.join(os.tmpdir(), 'config-reference-'));
  });

  afterAll(() => rmSync(tmp, { recursive: true, force: true }));

  it('is current: --check accepts the checked-in docs/reference/configuration.md', () => {
    const result = run('--check');
    expect(result.stderr).toBe('');
    expect(result.status).toBe(0);
  });

  it('has one row for every variable each schema class declares', () => {
    const variables = ENGINE_ENV_SCHEMAS.flatMap((schema) => Object.keys(new schema()));
    expect(variables.length).toBeGreaterThan(100);
    // The last section lists variables read elsewhere (test helpers too read SWITCHYARD_SANDBOX_IMAGE).
    const areas = generated.slice(0, generated.indexOf('## Variables read outside these classes'));
    for (const variable of variables) {
      const rows = areas.match(new RegExp(`^\\| \`${variable}\` +\\|`, 'gm')) ?? [];
      expect({ variable, rows: rows.length }).toEqual({ variable, rows: 1 });
    }
  });

  it('states the default and bounds the code gives (arithmetic evaluated)', () => {
    // PolicyEnv: @IntVar(1000, 7 * 24 * 3600 * 1000) SWITCHYARD_APPROVAL_TIMEOUT_MS = 15 * 60 * 1000.
    expect(generated).toMatch(
      /^\| `SWITCHYARD_APPROVAL_TIMEOUT_MS` +\| 900000 +\| integer 1000 – 604800000 +\|/m,
    );
  });

  it('--check fails with a diff and the command to run when the file is stale', () => {
    const stale = path.join(tmp, 'configuration.md');
    const row = /^(\| `SWITCHYARD_APPROVAL_TIMEOUT_MS` +\| )900000/m;
    expect(generated).toMatch(row);
    writeFileSync(
      stale,
      generated.replace(row, (_, start: string) => `${start}1`),
    );
    const result = run('--check', '--file', stale);
    expect(result.status).toBe(1);
    expect(result.stderr).toContain('-| `SWITCHYARD_APPROVAL_TIMEOUT_MS`');
    expect(result.stderr).toContain('run `node scripts/config-reference.mjs --write`');
  });
});
