import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EgressSite } from '../support/egress-site';
import { EngineHarness } from '../support/engine-harness';
import { SANDBOX_BACKENDS } from '../support/sandbox-backends';

jest.setTimeout(240_000);

/**
 * One session, one computer (issue 29): an agent's day in one template session, on each backend, with default
 * routing everywhere (no action names a tier). What the session installs and starts is there for every later action
 * (fresh or stateful, whatever tier its risk routes it to, one-off containers aside), kept by checkpoints, restores
 * and forks, and never seen by another session.
 *
 * The package comes from the loopback index through the egress proxy on Docker. The Kubernetes backend gives
 * sandboxes no egress (their pods reach no proxy: SECURITY.md), so there the session builds the same wheel in its
 * workspace and installs that file.
 */
describe.each(SANDBOX_BACKENDS.map((b) => [b.name, b] as const))('an agent day (%s)', (name, backend) => {
  let engine: EngineHarness;
  let site: EgressSite;
  const ports = { process: 0, kernel: 0 };
  const templatesDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-agent-day-'));
  const imageTag = readFileSync(path.resolve(__dirname, '../../.runtime/sandbox-image.tag'), 'utf8').trim();
  writeFileSync(
    path.join(templatesDir, 'workbench.toml'),
    `description = "the sandbox image, with a mark"\nimage = "${imageTag}"\n\n[env]\nWORKBENCH = "on"\n`,
  );

  const code = (sid: string, language: string, source: string, extra: Record<string, unknown> = {}) =>
    engine.action(sid, { type: 'code', language, code: source, timeoutMs: 60_000, ...extra });
  const cell = (sid: string, language: string, source: string) =>
    code(sid, language, source, { state: 'session' });
  const tool = (sid: string, id: string, command: string) =>
    engine.request('POST', `/v1/sessions/${sid}/tool-calls`, { id, name: 'bash', input: { command } });
  const curl = (port: number, retries = 30) =>
    `curl -sS -o /dev/null -w '%{http_code}' --retry ${retries} --retry-connrefused --retry-delay 0 ` +
    `--max-time 20 http://127.0.0.1:${port}/`;
  const greet = `import ${EgressSite.MODULE}\nprint(${EgressSite.MODULE}.greet())\n`;
  /** The wheel EgressSite serves, built by the session itself (python's zipfile), for a backend without egress. */
  const buildWheelInside = [
    'import base64, hashlib, zipfile',
    'files = {',
    `  "hello_switchyard/__init__.py": "def greet():\\n    return 'hello from a wheel'\\n",`,
    '  "hello_switchyard-0.1.dist-info/METADATA": "Metadata-Version: 2.1\\nName: hello-switchyard\\nVersion: 0.1\\n",',
    '  "hello_switchyard-0.1.dist-info/WHEEL": "Wheel-Version: 1.0\\nGenerator: t\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",',
    '}',
    'record = []',
    'with zipfile.ZipFile("hello_switchyard-0.1-py3-none-any.whl", "w") as z:',
    '    for name, text in files.items():',
    '        z.writestr(name, text)',
    '        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()',
    '        record.append("%s,sha256=%s,%d" % (name, digest, len(text)))',
    '    record.append("hello_switchyard-0.1.dist-info/RECORD,,")',
    '    z.writestr("hello_switchyard-0.1.dist-info/RECORD", "\\n".join(record) + "\\n")',
    'print("built")',
  ].join('\n');

  beforeAll(async () => {
    site = await EgressSite.start();
    engine = await EngineHarness.start({
      ...(await backend.env()),
      SWITCHYARD_TEMPLATES_DIR: templatesDir,
      // Egress exists on the Docker backend only (the engine refuses the setting on Kubernetes).
      ...(name === 'docker' && {
        SWITCHYARD_EGRESS_ALLOWED: 'pypi.test',
        SWITCHYARD_EGRESS_RESOLVE: EgressSite.resolveSetting,
      }),
    });
    const base = 20_000 + Math.floor(Math.random() * 20_000);
    ports.process = base;
    ports.kernel = base + 1;
  });
  afterAll(async () => {
    await engine?.stop();
    await site?.stop();
    rmSync(templatesDir, { recursive: true, force: true });
  });

  it('installs, starts, reaches, keeps and isolates, with default routing throughout', async () => {
    const docker = name === 'docker';
    const created = await engine.request('POST', '/v1/sessions', {
      template: 'workbench',
      ...(docker && { network: { allow: ['pypi.test'] } }),
    });
    expect(created.status).toBe(201);
    const sid = created.body.id as string;

    // 1. Install a package: plain pip, no flags but the index.
    if (docker) {
      const pip = await code(
        sid,
        'bash',
        `pip install --index-url http://pypi.test/simple --trusted-host pypi.test ${EgressSite.PACKAGE} 2>&1 | tail -1`,
      );
      expect(pip).toMatchObject({ status: 'succeeded' });
      expect(pip.stdout).toContain('Successfully installed hello-switchyard-0.1');
    } else {
      expect(await code(sid, 'python', buildWheelInside)).toMatchObject({
        status: 'succeeded',
        stdout: 'built\n',
      });
      const pip = await code(
        sid,
        'bash',
        'pip install ./hello_switchyard-0.1-py3-none-any.whl 2>&1 | tail -1',
      );
      expect(pip.stdout).toContain('Successfully installed hello-switchyard-0.1');
    }

    // 2. Import it from a fresh action (low risk: the subprocess tier on Docker, the pod on Kubernetes) and a kernel.
    const fresh = await code(sid, 'python', greet);
    expect(fresh).toMatchObject({ status: 'succeeded', stdout: 'hello from a wheel\n' });
    if (docker) expect(fresh.tier).toBe('subprocess');
    expect(await code(sid, 'bash', 'echo "$WORKBENCH"')).toMatchObject({
      status: 'succeeded',
      stdout: 'on\n',
    });
    const kernel = await cell(sid, 'python', greet);
    expect(kernel).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: 'hello from a wheel\n' });

    // 3. Start servers: a background process, and `&` in a bash kernel cell.
    const started = await engine.action(sid, {
      type: 'process',
      op: 'start',
      command: `python3 -u -m http.server ${ports.process} --bind 127.0.0.1`,
      name: 'web',
    });
    expect(started).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    const background = await cell(
      sid,
      'bash',
      `python3 -m http.server ${ports.kernel} --bind 127.0.0.1 >/dev/null 2>&1 &\necho started`,
    );
    expect(background).toMatchObject({ status: 'succeeded', stdout: 'started\n' });

    // 4. Reach both from fresh and from stateful actions.
    for (const port of [ports.process, ports.kernel]) {
      expect(await code(sid, 'bash', curl(port))).toMatchObject({ status: 'succeeded', stdout: '200' });
      const viaKernel = await cell(
        sid,
        'python',
        `import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:${port}/', timeout=10).status)`,
      );
      expect(viaKernel).toMatchObject({ status: 'succeeded', stdout: '200\n' });
    }

    // 5. `exit` in a bash tool call ends that call, not the session's shell.
    await tool(sid, 'b1', 'export DAY=kept; cd /workspace');
    const exited = await tool(sid, 'b2', 'echo leaving; exit 3');
    expect(exited.body).toMatchObject({ is_error: true });
    expect(exited.body.content).toContain('leaving');
    expect(exited.body.content).toContain('[exit_code]\n3');
    const after = await tool(sid, 'b3', 'echo "$DAY"');
    expect(after.body).toMatchObject({ is_error: false });
    expect(after.body.content).toContain('kept');

    // 6. A node cell's un-awaited promise: its output is in the cell's answer.
    const promise = await cell(
      sid,
      'node',
      `fetch('http://127.0.0.1:${ports.process}/').then((r) => console.log('status', r.status));`,
    );
    expect(promise).toMatchObject({ status: 'succeeded', stdout: 'status 200\n' });

    // 7. Checkpoint, fork and restore keep the installed package.
    const checkpoint = await engine.request('POST', `/v1/sessions/${sid}/checkpoints`, {});
    expect(checkpoint.status).toBe(201);
    const fork = await engine.request('POST', `/v1/sessions/${sid}/fork`, {});
    expect(fork.status).toBe(201);
    expect(await code(fork.body.id, 'python', greet)).toMatchObject({
      status: 'succeeded',
      stdout: 'hello from a wheel\n',
    });
    expect(await code(sid, 'bash', 'pip uninstall -y -q hello-switchyard && echo gone')).toMatchObject({
      stdout: 'gone\n',
    });
    expect((await code(sid, 'python', greet)).stderr).toContain('ModuleNotFoundError');
    await engine.action(sid, { type: 'process', op: 'stop', processId: 'web', graceMs: 1000 });
    for (const k of (await engine.request('GET', `/v1/sessions/${sid}/kernels`)).body.kernels) {
      await engine.request('DELETE', `/v1/sessions/${sid}/kernels/${k.id}`);
    }
    const restored = await engine.request(
      'POST',
      `/v1/sessions/${sid}/checkpoints/${checkpoint.body.id}/restore`,
    );
    expect(restored.status).toBe(200);
    expect(await code(sid, 'python', greet)).toMatchObject({
      status: 'succeeded',
      stdout: 'hello from a wheel\n',
    });

    // 8. Another session sees none of it: not the package, not the servers.
    const other = await engine.createSession({ template: 'workbench' });
    expect((await code(other, 'python', greet)).stderr).toContain('ModuleNotFoundError');
    const stranger = await code(other, 'bash', curl(ports.kernel, 0));
    expect(stranger).toMatchObject({ status: 'failed', stdout: '000' });
  });
});
