import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';

const REPO = path.join(__dirname, '../..');
const SCRIPT = path.join(REPO, 'scripts/sandbox-image.mjs');

/**
 * Sandbox templates against real Docker and a real build: a tiny template (Debian jq, pip six, an env var) written
 * into a temporary templates directory under a name of its own (test runs sharing the machine never meet), built
 * with the builder script, used by sessions in the pooled tier, a kernel, a background process and the one-off tier.
 */
describe('sandbox templates (real Docker, real builds)', () => {
  const name = `e2e-tiny-${randomBytes(3).toString('hex')}`;
  const mark = `mark-${name}`;
  const text = [
    'description = "e2e: jq, six and a variable"',
    '[debian]',
    'packages = ["jq"]',
    '[pip]',
    'packages = ["six==1.16.0"]',
    '[env]',
    `TINY_MARK = "${mark}"`,
    '',
  ].join('\n');
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-templates-'));
  const dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'switchyard-e2e-'));
  const file = path.join(dir, `${name}.toml`);
  let engine: EngineHarness;
  let early: string;

  /**
   * Runs the builder without blocking this process: the engine under test shares its event loop, and a build of
   * many seconds held in a `spawnSync` would let the server's keep-alive timer and the next request race for the
   * same idle socket (ECONNRESET).
   */
  const build = (): Promise<{ status: number | null; stdout: string; stderr: string }> =>
    new Promise((resolve, reject) => {
      const child = spawn(process.execPath, [SCRIPT, '--template', name], {
        env: { ...process.env, SWITCHYARD_TEMPLATES_DIR: dir },
        timeout: 600_000,
      });
      let stdout = '';
      let stderr = '';
      child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
      child.stderr.setEncoding('utf8').on('data', (c: string) => (stderr += c));
      child.on('error', reject);
      child.on('close', (status) => resolve({ status, stdout, stderr }));
    });
  const view = async (): Promise<any> => {
    const res = await engine.request('GET', '/v1/templates');
    expect(res.status).toBe(200);
    return (res.body.templates as Array<{ name: string }>).find((t) => t.name === name);
  };
  const code = (sid: string, body: Record<string, unknown>): Promise<any> =>
    engine.action(sid, { type: 'code', language: 'bash', timeoutMs: 20_000, ...body });
  const PROBE =
    'jq --version 2>&1 || echo no-jq; python3 -c "import six; print(\'six\', six.__version__)" 2>&1 | tail -1; ' +
    'echo "mark=[$TINY_MARK]"; id -u';

  beforeAll(async () => {
    fs.writeFileSync(file, text);
    engine = await EngineHarness.start({ SWITCHYARD_TEMPLATES_DIR: dir }, { dataDir });
  });
  afterAll(async () => {
    await engine?.stop();
    const images = execFileSync('docker', ['image', 'ls', '-q', `switchyard/sandbox-${name}`], {
      encoding: 'utf8',
      timeout: 30_000,
    });
    for (const id of new Set(images.split('\n').filter(Boolean))) {
      spawnSync('docker', ['image', 'rm', '-f', id], { stdio: 'ignore', timeout: 30_000 });
    }
    for (const f of [`${name}.tag`, `${name}.json`, `${name}.log`]) {
      fs.rmSync(path.join(REPO, '.runtime/templates', f), { force: true });
    }
    fs.rmSync(dir, { recursive: true, force: true });
    fs.rmSync(dataDir, { recursive: true, force: true });
  });

  it('lists the template missing, with the command that builds it', async () => {
    const t = await view();
    expect(t).toMatchObject({
      name,
      description: 'e2e: jq, six and a variable',
      kind: 'packages',
      state: 'missing',
      packages: { debian: ['jq'], pip: ['six==1.16.0'], npm: [] },
      env: { TINY_MARK: mark },
    });
    expect(t.image).toMatch(new RegExp(`^switchyard/sandbox-${name}:[0-9a-f]{12}$`));
    expect(t.build).toBe(`SWITCHYARD_TEMPLATES_DIR=${dir} node scripts/sandbox-image.mjs --template ${name}`);
  });

  it('refuses an unknown template with a 400 naming `template`', async () => {
    const res = await engine.request('POST', '/v1/sessions', { template: 'no-such-template' });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('template');
    expect(JSON.stringify(res.body)).toContain(name);
  });

  it('denies the actions of a session whose template is not built, in every tier, never using the default image', async () => {
    const res = await engine.request('POST', '/v1/sessions', { template: name });
    expect(res.status).toBe(201);
    expect(res.body.template).toBe(name);
    early = res.body.id;
    for (const body of [
      { code: 'echo hi' },
      { code: 'echo hi', tier: 'container' },
      { code: 'echo hi', state: 'session' },
    ]) {
      const r = await code(early, body);
      expect(r.status).toBe('denied');
      expect(r.error).toMatchObject({ code: 'TEMPLATE_NOT_READY' });
      expect(r.error.message).toContain(`--template ${name}`);
    }
    const p = await engine.action(early, { type: 'process', op: 'start', command: 'sleep 1' });
    expect(p).toMatchObject({ status: 'denied', error: { code: 'TEMPLATE_NOT_READY' } });
  });

  it('builds it with the script (then ready); a second build is a cache hit', async () => {
    const expected = (await view()).image;
    const first = await build();
    expect(first.stderr).toContain(`built ${expected}`);
    expect(first.status).toBe(0);
    expect(first.stdout.trim()).toBe(expected);
    const t = await view();
    expect(t).toMatchObject({ state: 'ready', image: expected });
    expect(t.build).toBeUndefined();

    const t0 = performance.now();
    const again = await build();
    const took = performance.now() - t0;
    expect(again.status).toBe(0);
    expect(again.stdout.trim()).toBe(expected);
    expect(again.stderr).toContain(`up to date: ${expected} (cached`);
    expect(took).toBeLessThan(1000);
  }, 600_000);

  it('runs a template session in its image in every tier: code, kernels, processes', async () => {
    const sid = early; // picked before the build: its actions run now
    const want = ['jq-1.6', 'six 1.16.0', `mark=[${mark}]`, '10001'];

    // Low risk runs in the subprocess tier, on the template image's exported root: the same packages and env.
    const low = await code(sid, { code: PROBE });
    expect(low).toMatchObject({ status: 'succeeded', tier: 'subprocess' });
    for (const w of want) expect(low.stdout).toContain(w);
    const pooled = await code(sid, { code: PROBE, tier: 'pooled' });
    expect(pooled).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: low.stdout });

    const cell = await engine.action(sid, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'import os, six\n(six.__version__, os.environ["TINY_MARK"])',
    });
    expect(cell).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    expect(cell.output.kernel.tier).toBe('pooled');
    expect(cell.output.result).toBe(`('1.16.0', '${mark}')`);

    const started = await engine.action(sid, {
      type: 'process',
      op: 'start',
      command: 'jq -n --arg m "$TINY_MARK" \'$m\'',
    });
    expect(started).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    const waited = await engine.action(sid, {
      type: 'process',
      op: 'wait',
      processId: started.output.processId,
      timeoutMs: 10_000,
    });
    expect(waited.status).toBe('succeeded');
    const logs = await engine.action(sid, {
      type: 'process',
      op: 'logs',
      processId: started.output.processId,
    });
    expect(logs.stdout).toBe(`"${mark}"\n`);

    const oneOff = await code(sid, { code: PROBE, tier: 'container' });
    expect(oneOff).toMatchObject({ status: 'succeeded', tier: 'container' });
    for (const w of want) expect(oneOff.stdout).toContain(w);
  });

  it('a session without the template sees none of it (the default image)', async () => {
    const plain = await engine.createSession();
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await code(plain, { code: PROBE, tier });
      expect(r).toMatchObject({ status: 'succeeded', tier });
      expect(r.stdout).toContain('no-jq');
      expect(r.stdout).toContain('ModuleNotFoundError');
      expect(r.stdout).toContain('mark=[]');
    }
  });

  it('editing the file makes it stale, and its actions are denied until it is rebuilt', async () => {
    const built = (await view()).image;
    fs.appendFileSync(file, '# edited\n');
    const t = await view();
    expect(t).toMatchObject({ state: 'stale', builtImage: built });
    expect(t.image).not.toBe(built);
    const r = await code(early, { code: 'echo hi' });
    expect(r).toMatchObject({ status: 'denied', error: { code: 'TEMPLATE_NOT_READY' } });
    expect(r.error.message).toContain('changed since the last build');
  });

  it('keeps the template with the session across an engine restart', async () => {
    await engine.stop();
    engine = await EngineHarness.start({ SWITCHYARD_TEMPLATES_DIR: dir }, { dataDir });
    const res = await engine.request('GET', `/v1/sessions/${early}`);
    expect(res.status).toBe(200);
    expect(res.body.template).toBe(name);
  });
});
