import { execFile } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { EngineHarness } from '../support/engine-harness';

const run = promisify(execFile);
const ROOT = path.join(__dirname, '..', '..');
const PACKAGE = path.join(ROOT, 'packages', 'client');
const TSC = path.join(ROOT, 'node_modules', 'typescript', 'bin', 'tsc');

/** A program as a user of the installed package writes it: the SDK's verbs, then the generic client. */
const PROGRAM = `
import { Sandbox, SwitchyardClient } from '@switchyard/client';

async function main(): Promise<void> {
  const client = new SwitchyardClient();
  const sbx = await Sandbox.create({ metadata: { agent: 'pack-e2e' } });
  try {
    const cell = await sbx.runCode('x = 6\\nx * 7');
    const written = await sbx.files.write('hello.txt', new TextEncoder().encode('packed\\n'));
    const text = await sbx.files.read('hello.txt');
    const cmd = await sbx.commands.run('tr a-z A-Z < hello.txt');
    const bg = await sbx.commands.run('echo background', { background: true });
    const waited = await bg.wait({ timeoutMs: 30_000 });
    const call = await client.tools.call(sbx.id, { id: 'c1', name: 'bash', input: { command: 'echo tool' } });
    console.log(JSON.stringify({ value: cell.text, size: written.size, text, cmd, waited, call }));
  } finally {
    await sbx.kill();
  }
}
void main();
`;

/** The README's line, as a reader pastes it. */
const README_LINE = `
import { SwitchyardClient } from '@switchyard/client';
const client = new SwitchyardClient();
export async function demo(sid: string): Promise<void> {
  await client.tools.call(sid, {id:'c1', name:'bash', input:{command:'x'}});
}
`;

/**
 * `@switchyard/client` as an artefact: `npm pack`, installed into a fresh project (its dependencies from the npm
 * cache that the repository's `npm ci` filled), a TypeScript program compiled against it under `--strict` and run
 * against a real engine; the CLI from the installed package's bin.
 */
describe('@switchyard/client packed and installed elsewhere', () => {
  let engine: EngineHarness;
  let dir: string;
  let project: string;

  beforeAll(async () => {
    expect(existsSync(path.join(PACKAGE, 'dist', 'sandbox.js'))).toBe(true); // built by `npm run build`
    engine = await EngineHarness.start();
    dir = mkdtempSync(path.join(os.tmpdir(), 'client-pack-'));
    await run('npm', ['pack', '--pack-destination', dir], { cwd: PACKAGE });
    const [tgz] = readdirSync(dir).filter((f) => f.endsWith('.tgz'));
    project = path.join(dir, 'project');
    mkdirSync(project);
    writeFileSync(path.join(project, 'package.json'), JSON.stringify({ name: 'pack-e2e', private: true }));
    await run('npm', ['install', '--prefer-offline', '--no-audit', '--no-fund', path.join(dir, tgz)], {
      cwd: project,
    });
  }, 120_000);
  afterAll(async () => {
    if (dir) rmSync(dir, { recursive: true, force: true });
    await engine?.stop();
  });

  /** Compiles `source` in the project under `--strict` (Node's types from the repository); answers tsc's output. */
  async function compile(name: string, source: string): Promise<{ ok: boolean; output: string }> {
    writeFileSync(path.join(project, `${name}.ts`), source);
    const args = [
      TSC,
      '--strict',
      '--target',
      'ES2022',
      '--module',
      'commonjs',
      '--moduleResolution',
      'node10',
      '--esModuleInterop',
      '--skipLibCheck',
      '--types',
      'node',
      '--typeRoots',
      path.join(ROOT, 'node_modules', '@types'),
      `${name}.ts`,
    ];
    try {
      const { stdout } = await run(process.execPath, args, { cwd: project });
      return { ok: true, output: stdout };
    } catch (error) {
      return { ok: false, output: String((error as { stdout?: string }).stdout ?? error) };
    }
  }

  it('packs only what a user needs: dist (js and types), bin, openapi.json', async () => {
    const installed = path.join(project, 'node_modules', '@switchyard', 'client');
    expect(readdirSync(installed).sort()).toEqual(['bin', 'dist', 'openapi.json', 'package.json']);
    expect(
      readdirSync(path.join(installed, 'dist')).some((f) => f.endsWith('.map') || f.includes('spec')),
    ).toBe(false);
  });

  it('a TypeScript program compiles under --strict against it and drives a real engine', async () => {
    const compiled = await compile('program', PROGRAM);
    expect(compiled).toEqual({ ok: true, output: '' });
    const { stdout } = await run(process.execPath, ['program.js'], {
      cwd: project,
      env: { ...process.env, SWITCHYARD_URL: engine.baseUrl, SWITCHYARD_API_KEY: '' },
    });
    const answer = JSON.parse(stdout) as Record<string, any>;
    expect(answer).toMatchObject({
      value: '42',
      size: 7,
      text: 'packed\n',
      cmd: { exitCode: 0, stdout: 'PACKED\n', stderr: '' },
      waited: { exitCode: 0, stdout: 'background\n' },
      call: { tool_use_id: 'c1', is_error: false },
    });
    expect(answer.call.content).toContain('tool');
  });

  it("the README's client.tools.call line compiles under tsc --strict", async () => {
    expect(await compile('readme', README_LINE)).toEqual({ ok: true, output: '' });
  });

  it('the installed bin runs the CLI', async () => {
    const { stdout } = await run(
      process.execPath,
      [path.join(project, 'node_modules', '.bin', 'switchyard'), 'exec', 'python', '-c', 'print(7 * 6)'],
      { env: { ...process.env, SWITCHYARD_URL: engine.baseUrl, SWITCHYARD_API_KEY: '' } },
    );
    expect(stdout).toBe('42\n');
  });
});
