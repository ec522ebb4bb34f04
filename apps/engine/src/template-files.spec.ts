import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { loadEngineConfig } from './platform/config/engine-config';
import { bootProblems } from './boot-files.testing';

describe('SWITCHYARD_TEMPLATES_DIR', () => {
  let cwd: string;
  beforeEach(() => {
    cwd = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-templates-env-'));
  });
  afterEach(() => fs.rmSync(cwd, { recursive: true, force: true }));

  const problems = (env: Record<string, string>): string[] => bootProblems(env, cwd);

  it('defaults to docker/templates in the working directory, which may be absent', () => {
    const c = loadEngineConfig({}, cwd);
    expect(c.templates.dir).toBe(path.join(cwd, 'docker', 'templates'));
    expect(c.templates.stateDir).toBe(path.join(cwd, '.runtime', 'templates'));
    expect(c.templates.buildCommand('tiny')).toBe('node scripts/sandbox-image.mjs --template tiny');
  });

  it('reads every template at boot: a bad file stops start-up naming the file', () => {
    const dir = path.join(cwd, 'tpl');
    fs.mkdirSync(dir);
    fs.writeFileSync(path.join(dir, 'good.toml'), '[pip]\npackages = ["six==1.16.0"]\n');
    fs.writeFileSync(path.join(dir, 'bad.toml'), '[pip]\npackages = ["six; id"]\n');
    fs.writeFileSync(path.join(dir, 'Upper.toml'), '');
    fs.writeFileSync(path.join(dir, 'notes.txt'), 'not a template');
    const found = problems({ SWITCHYARD_TEMPLATES_DIR: 'tpl' });
    expect(found).toEqual([
      `SWITCHYARD_TEMPLATES_DIR: template file ${path.join(dir, 'Upper.toml')}: the name "Upper" must be lower-case letters, digits and inner dashes (at most 63)`,
      `SWITCHYARD_TEMPLATES_DIR: template file ${path.join(dir, 'bad.toml')}: pip.packages: "six; id" is not a pip package spec`,
    ]);
    fs.rmSync(path.join(dir, 'bad.toml'));
    fs.rmSync(path.join(dir, 'Upper.toml'));
    const c = loadEngineConfig(
      { SWITCHYARD_TEMPLATES_DIR: 'tpl', SWITCHYARD_SANDBOX_IMAGE: 'team/sb:1' },
      cwd,
    );
    expect(c.templates.dir).toBe(dir);
    // The command names what differs from the builder's defaults.
    expect(c.templates.buildCommand('good')).toBe(
      `SWITCHYARD_TEMPLATES_DIR=${dir} SWITCHYARD_SANDBOX_IMAGE=team/sb:1 node scripts/sandbox-image.mjs --template good`,
    );
  });

  it('refuses a directory that was named and is missing or a file', () => {
    expect(problems({ SWITCHYARD_TEMPLATES_DIR: '/nonexistent/templates' })).toEqual([
      expect.stringMatching(/^SWITCHYARD_TEMPLATES_DIR: \/nonexistent\/templates: ENOENT/),
    ]);
    fs.writeFileSync(path.join(cwd, 'file'), '');
    expect(problems({ SWITCHYARD_TEMPLATES_DIR: 'file' })).toEqual([
      `SWITCHYARD_TEMPLATES_DIR: ${path.join(cwd, 'file')} is not a directory`,
    ]);
  });
});
