import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { buildWheel, EgressSite } from '../support/egress-site';
import { EngineHarness } from '../support/engine-harness';

/**
 * One session, one home (issue 29): `HOME` is the session's `/workspace/.home` in every tier, so what the session
 * installs for its user (a wheel with plain `pip install`, here from a file: no network needed) is there for every
 * later action, fresh or stateful, in whichever tier it is routed to; checkpoints, restores and forks keep it; another
 * session sees none of it.
 */
describe('the session’s home, in every tier', () => {
  let engine: EngineHarness;
  let wheelDir: string;
  let wheel: Buffer;
  const MODULE = EgressSite.MODULE;
  const IMPORT = `import ${MODULE}; print(${MODULE}.greet())`;
  const code = (sid: string, source: string, extra: Record<string, unknown> = {}): Promise<any> =>
    engine.action(sid, { type: 'code', language: 'python', code: source, timeoutMs: 60_000, ...extra });
  const bash = (sid: string, source: string, extra: Record<string, unknown> = {}): Promise<any> =>
    engine.action(sid, { type: 'code', language: 'bash', code: source, timeoutMs: 60_000, ...extra });

  /** Puts the wheel in the session's workspace and installs it, flagless, into the session's home. */
  const install = async (sid: string): Promise<any> => {
    const name = 'hello_switchyard-0.1-py3-none-any.whl';
    const put = await code(
      sid,
      `import base64\nopen(${JSON.stringify(name)}, "wb").write(base64.b64decode(${JSON.stringify(wheel.toString('base64'))}))`,
    );
    expect(put).toMatchObject({ status: 'succeeded' });
    return bash(sid, `pip install --no-index ./${name} 2>&1 && rm ${name}`, { tier: 'pooled' });
  };

  beforeAll(async () => {
    wheelDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-home-'));
    wheel = readFileSync(buildWheel(wheelDir));
    engine = await EngineHarness.start();
  });
  afterAll(async () => {
    await engine.stop();
    rmSync(wheelDir, { recursive: true, force: true });
  });

  it('is /workspace/.home in every tier, a directory the sandbox user owns', async () => {
    const sid = await engine.createSession();
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await bash(sid, 'echo "$HOME"; test -d ~ && test -w ~ && echo writable', { tier });
      expect({ tier, ...r }).toMatchObject({
        tier,
        status: 'succeeded',
        stdout: '/workspace/.home\nwritable\n',
      });
    }
  });

  it('keeps what pip installed for every later action, fresh or stateful, in every tier', async () => {
    const sid = await engine.createSession();
    const pip = await install(sid);
    expect(pip).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    expect(pip.stdout).toContain('Successfully installed hello-switchyard-0.1');
    expect(pip.stdout).not.toContain('externally-managed-environment');
    // Default routing (an import scores low: the subprocess tier), then each tier by name, then a session kernel.
    const plain = await code(sid, IMPORT);
    expect(plain).toMatchObject({ status: 'succeeded', tier: 'subprocess', stdout: 'hello from a wheel\n' });
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await code(sid, IMPORT, { tier });
      expect({ tier, ...r }).toMatchObject({ tier, status: 'succeeded', stdout: 'hello from a wheel\n' });
    }
    for (const tier of ['subprocess', 'pooled']) {
      const cell = await code(sid, IMPORT, { tier, state: 'session' });
      expect({ tier, ...cell }).toMatchObject({ tier, status: 'succeeded', stdout: 'hello from a wheel\n' });
    }
    // What the install wrote is the session's home, not files of its work: the action records none of them.
    expect(pip.files ?? []).toEqual([]);
  });

  it('keeps what `npm install -g` installed (its prefix is in the home) for every later action, in every tier', async () => {
    const sid = await engine.createSession();
    // A package made here (npm pack), so no registry is needed: a command-line tool with a bin.
    const installed = await bash(
      sid,
      [
        'mkdir -p hi && cd hi',
        `printf '%s' '{"name":"hi-cli","version":"1.0.0","bin":{"hi-cli":"cli.js"}}' > package.json`,
        `printf '#!/usr/bin/env node\\nconsole.log("hi from npm")\\n' > cli.js`,
        'npm pack -q >/dev/null && npm install -g --offline -q ./hi-cli-1.0.0.tgz >/dev/null',
        'cd .. && rm -rf hi && npm --version',
      ].join('\n'),
    );
    expect(installed).toMatchObject({ status: 'succeeded', stdout: '10.9.2\n' });
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await bash(sid, 'command -v hi-cli; hi-cli', { tier });
      expect({ tier, ...r }).toMatchObject({
        tier,
        status: 'succeeded',
        stdout: '/workspace/.home/.npm-global/bin/hi-cli\nhi from npm\n',
      });
    }
    // Another session has none of it.
    const other = await bash(await engine.createSession(), 'command -v hi-cli || echo none');
    expect(other.stdout).toBe('none\n');
  });

  it('keeps a venv made in the workspace usable from every tier', async () => {
    const sid = await engine.createSession();
    const made = await bash(
      sid,
      'python3 -m venv .venv && .venv/bin/python -c "import sys; print(sys.prefix)"',
    );
    expect(made).toMatchObject({ status: 'succeeded', stdout: '/workspace/.venv\n' });
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await bash(sid, '.venv/bin/python -c "import sys; print(sys.prefix, sys.version_info[0])"', {
        tier,
      });
      expect({ tier, ...r }).toMatchObject({ tier, status: 'succeeded', stdout: '/workspace/.venv 3\n' });
    }
  });

  it('goes into checkpoints and forks, comes back on restore, and stays with its session', async () => {
    const sid = await engine.createSession();
    expect(await install(sid)).toMatchObject({ status: 'succeeded' });
    const taken = await engine.request('POST', `/v1/sessions/${sid}/checkpoints`, {});
    expect(taken.status).toBe(201);
    const fork = await engine.request('POST', `/v1/sessions/${sid}/fork`, {});
    expect(fork.status).toBe(201);

    expect(await bash(sid, 'rm -rf ~/.local && echo gone')).toMatchObject({
      status: 'succeeded',
      stdout: 'gone\n',
    });
    const missing = await code(sid, IMPORT);
    expect(missing).toMatchObject({ status: 'failed' });
    expect(missing.stderr).toContain('ModuleNotFoundError');

    const restored = await engine.request('POST', `/v1/sessions/${sid}/checkpoints/${taken.body.id}/restore`);
    expect(restored.status).toBe(200);
    expect(await code(sid, IMPORT)).toMatchObject({ status: 'succeeded', stdout: 'hello from a wheel\n' });
    expect(await code(fork.body.id, IMPORT)).toMatchObject({
      status: 'succeeded',
      stdout: 'hello from a wheel\n',
    });

    const other = await engine.createSession();
    const elsewhere = await code(other, IMPORT);
    expect(elsewhere).toMatchObject({ status: 'failed' });
    expect(elsewhere.stderr).toContain('ModuleNotFoundError');
  });

  it('is left out of the file API’s listing of the workspace, and listed when asked by name', async () => {
    const sid = await engine.createSession();
    expect(
      await bash(sid, 'mkdir -p ~/.config && echo x > ~/.config/tool.conf && echo y > work.txt'),
    ).toMatchObject({
      status: 'succeeded',
    });
    const top = await engine.action(sid, { type: 'file', op: 'list', recursive: true });
    expect(top.output.entries.map((e: { path: string }) => e.path)).toEqual(['work.txt']);
    const home = await engine.action(sid, { type: 'file', op: 'list', path: '.home', recursive: true });
    expect(home.output.entries.map((e: { path: string }) => e.path)).toEqual([
      '.home/.config',
      '.home/.config/tool.conf',
    ]);
  });
});
