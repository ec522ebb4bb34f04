import { createServer, type Server } from 'node:http';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EngineHarness, LogCapture } from '../support/engine-harness';
import {
  containerStartedAhead,
  containersWith,
  docker,
  inspectContainer,
  LABELS,
} from '../support/host-probes';
import { LOOPBACK_ONLY, NETWORK_PROBE, probed } from '../support/network-probe';

/**
 * The one-off tier's Docker runtime (SWITCHYARD_CONTAINER_RUNTIME; SECURITY.md 26): by default gVisor, so high-risk
 * code talks to gVisor's kernel and never to the host's; runc on request; an explicit runsc that Docker lacks is a
 * refusal naming the setting, never a silent runc. `npm test` registers runsc with the dockerd it starts
 * (scripts/docker-engine.sh); these tests fail, never skip, on an engine without it.
 */
jest.setTimeout(60_000);

const HOST_KERNEL = os.release();
/**
 * What the code sees of its kernel: its release, its boot command line (gVisor's names its kernel image
 * `vmlinuz-…-gvisor`) and the kernel log, which Docker's seccomp profile keeps closed in both runtimes (gVisor
 * applies the profile itself: runsc runs with --oci-seccomp).
 */
const KERNEL_PROBE = 'uname -r; cat /proc/cmdline; dmesg 2>&1 | head -n 3';

async function sandboxNode(engine: EngineHarness, sessionId: string, actionId: string): Promise<any> {
  const graph = (await engine.request('GET', `/v1/sessions/${sessionId}/graph`)).body;
  const edge = graph.edges.find((e: any) => e.type === 'RAN_IN' && e.from === actionId);
  return graph.nodes.find((n: any) => n.id === edge?.to);
}

describe('one-off tier on gVisor (the default: SWITCHYARD_CONTAINER_RUNTIME=auto with runsc registered)', () => {
  let engine: EngineHarness;
  const logs = new LogCapture();
  let sid: string;

  beforeAll(async () => {
    const runtimes = await docker('info', '--format', '{{json .Runtimes}}');
    if (!runtimes.includes('"runsc"')) {
      throw new Error(
        `the Docker engine has no runsc runtime (${runtimes.trim()}): run bash scripts/docker-engine.sh`,
      );
    }
    engine = await EngineHarness.start({ SWITCHYARD_LOG_LEVEL: 'info', SWITCHYARD_POOL_MIN: '1' }, { logs });
    sid = await engine.createSession();
  });
  afterAll(() => engine?.stop());

  it('says at start-up, in /health and in /health/ready that the one-off tier runs on runsc', async () => {
    expect(logs.raw.some((l) => /container tier available \(.*runtime runsc: gVisor\)/.test(l))).toBe(true);
    const health = (await engine.request('GET', '/health')).body;
    expect(health.tiers.container).toMatchObject({ available: true, details: { runtime: 'runsc' } });
    // The pooled tier stays on Docker's default runtime: it chooses none.
    expect(health.tiers.pooled.details?.runtime).toBeUndefined();
    const ready = await engine.request('GET', '/health/ready');
    expect(ready.status).toBe(200);
    expect(ready.body.details.container_runtime).toEqual({ status: 'up', runtime: 'runsc' });
  });

  it("runs the code on gVisor's kernel, not the host's; records runsc on the action and its Sandbox node", async () => {
    const r = await engine.action(sid, {
      type: 'code',
      language: 'bash',
      tier: 'container',
      code: KERNEL_PROBE,
    });
    expect(r).toMatchObject({ status: 'succeeded', tier: 'container' });
    const [release, cmdline, kernelLog] = r.stdout.trim().split('\n');
    // gVisor reports a Linux version and a boot command line of its own; nothing of the host's kernel shows.
    expect(release).not.toBe(HOST_KERNEL);
    // Debian's runsc says 4.4.0, the one scripts/k8s.sh builds 4.19.0-gvisor.
    expect(release).toMatch(/^\d+\.\d+\.\d+(-gvisor)?$/);
    expect(cmdline).toMatch(/vmlinuz-[\d.]+-gvisor/);
    expect(cmdline).not.toBe(readFileSync('/proc/cmdline', 'utf8').trim());
    expect(kernelLog).toMatch(/dmesg: .*Operation not permitted/);

    const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}`)).body;
    expect(view.sandbox).toEqual({
      tier: 'container',
      containerId: expect.stringMatching(/^[0-9a-f]{64}$/),
      runtime: 'runsc',
    });
    const node = await sandboxNode(engine, sid, r.id);
    expect(node).toEqual({
      id: `sandbox:${view.sandbox.containerId}`,
      label: 'Sandbox',
      properties: { tier: 'container', containerId: view.sandbox.containerId, runtime: 'runsc' },
    });
    const context = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}/context?before=0`))
      .body;
    expect(context.action.sandbox).toMatchObject({ runtime: 'runsc' });
  });

  it('asks Docker for runsc by name: the container it created says HostConfig.Runtime runsc', async () => {
    // The one-off container is removed when its action ends: look at it while it runs.
    const pending = engine.action(sid, {
      type: 'code',
      language: 'bash',
      tier: 'container',
      code: 'sleep 3; echo done',
    });
    let id: string | undefined;
    for (let i = 0; i < 100 && !id; i++) {
      const out = await docker(
        'ps',
        '-q',
        '--no-trunc',
        '--filter',
        `label=dev.switchyard.session=${sid}`,
        '--filter',
        'label=dev.switchyard.tier=container',
      );
      id = out.trim().split('\n')[0] || undefined;
      if (!id) await new Promise((r) => setTimeout(r, 50));
    }
    expect(id).toBeDefined();
    expect((await inspectContainer(id!)).HostConfig.Runtime).toBe('runsc');
    expect(await pending).toMatchObject({ status: 'succeeded', stdout: 'done\n' });
  });

  it('gives the container a network namespace holding only lo, no route, and a /etc/hosts naming localhost', async () => {
    const r = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'container',
      code: NETWORK_PROBE,
    });
    expect(r).toMatchObject({ status: 'succeeded', tier: 'container' });
    expect(probed(r.stdout)).toEqual(LOOPBACK_ONLY);
  });

  it("starts a session's next one-off container ahead: the next action runs in it, fresh, on gVisor, with only lo", async () => {
    const s = await engine.createSession();
    // A session's first one-off action starts nothing ahead; from its second on, its next container is started.
    const opening = await engine.action(s, {
      type: 'code',
      language: 'python',
      tier: 'container',
      code: 'pass',
    });
    expect(opening).toMatchObject({ status: 'succeeded' });
    const first = await engine.action(s, {
      type: 'code',
      language: 'python',
      tier: 'container',
      code: "open('/tmp/mark', 'w').write('1')\nopen('made.txt', 'w').write('by the first')\nprint('first')",
    });
    expect(first).toMatchObject({ status: 'succeeded', stdout: 'first\n' });
    const ahead = await containerStartedAhead(s);
    expect((await inspectContainer(ahead)).HostConfig.Runtime).toBe('runsc');
    const next = await engine.action(s, {
      type: 'code',
      language: 'python',
      tier: 'container',
      code: [
        NETWORK_PROBE,
        'import os, platform',
        "print(os.path.exists('/tmp/mark'), open('made.txt').read(), platform.release())",
      ].join('\n'),
    });
    expect(next).toMatchObject({ status: 'succeeded', tier: 'container' });
    const [probe, seen] = next.stdout.trim().split('\n');
    expect(probed(probe)).toEqual(LOOPBACK_ONLY);
    // A fresh container (nothing of the first action's /tmp), the session's files, gVisor's kernel.
    expect(seen).toMatch(/^False by the first \d+\.\d+\.\d+(-gvisor)?$/);
    expect(seen).not.toContain(HOST_KERNEL);
    const view = (await engine.request('GET', `/v1/sessions/${s}/actions/${next.id}`)).body;
    expect(view.sandbox).toEqual({ tier: 'container', containerId: ahead, runtime: 'runsc' });
    // Ending the session leaves no container of it, the one started after this action included.
    await containerStartedAhead(s);
    expect((await engine.request('DELETE', `/v1/sessions/${s}`)).status).toBe(204);
    for (let i = 0; i < 200 && (await containersWith({ [LABELS.session]: s })).length > 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    expect(await containersWith({ [LABELS.session]: s })).toEqual([]);
  });

  it('high-risk code routed by the policy lands there too', async () => {
    // `sudo` scores as privilege escalation: high risk, the one-off tier.
    const r = await engine.action(sid, {
      type: 'code',
      language: 'bash',
      code: `sudo -n true 2>/dev/null; ${KERNEL_PROBE}`,
    });
    expect(r).toMatchObject({ status: 'succeeded', tier: 'container', risk: { level: 'high' } });
    expect(r.stdout).toMatch(/gvisor/);
    expect(r.stdout).not.toContain(HOST_KERNEL);
  });

  it('leaves the pooled tier on runc (the host kernel), recording no runtime, with only lo and no route', async () => {
    const r = await engine.action(sid, { type: 'code', language: 'bash', tier: 'pooled', code: 'uname -r' });
    expect(r).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: `${HOST_KERNEL}\n` });
    const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}`)).body;
    expect(view.sandbox).toEqual({ tier: 'pooled', containerId: expect.any(String) });
    // Its warm container has no network set-up either: only lo, no route, localhost named by the engine's hosts file.
    const net = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'pooled',
      code: NETWORK_PROBE,
    });
    expect(net).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    expect(probed(net.stdout)).toEqual(LOOPBACK_ONLY);
    expect((await inspectContainer(view.sandbox.containerId)).Config.NetworkDisabled).toBe(true);
  });
});

describe('SWITCHYARD_CONTAINER_RUNTIME=runc', () => {
  let engine: EngineHarness;
  afterAll(() => engine?.stop());

  it("runs the one-off tier on runc: the host's kernel, recorded as runc, with only lo and no route", async () => {
    engine = await EngineHarness.start({ SWITCHYARD_CONTAINER_RUNTIME: 'runc', SWITCHYARD_POOL_MIN: '0' });
    const health = (await engine.request('GET', '/health')).body;
    expect(health.tiers.container).toMatchObject({ available: true, details: { runtime: 'runc' } });
    expect((await engine.request('GET', '/health/ready')).body.details.container_runtime).toEqual({
      status: 'up',
      runtime: 'runc',
    });
    const sid = await engine.createSession();
    const r = await engine.action(sid, {
      type: 'code',
      language: 'bash',
      tier: 'container',
      code: KERNEL_PROBE,
    });
    expect(r).toMatchObject({ status: 'succeeded', tier: 'container' });
    const [release, cmdline] = r.stdout.split('\n');
    expect(release).toBe(HOST_KERNEL);
    expect(cmdline).toBe(readFileSync('/proc/cmdline', 'utf8').trim());
    expect(r.stdout).not.toMatch(/gvisor/i);
    const view = (await engine.request('GET', `/v1/sessions/${sid}/actions/${r.id}`)).body;
    expect(view.sandbox).toMatchObject({ tier: 'container', runtime: 'runc' });
    expect((await sandboxNode(engine, sid, r.id)).properties.runtime).toBe('runc');
    const net = await engine.action(sid, {
      type: 'code',
      language: 'python',
      tier: 'container',
      code: NETWORK_PROBE,
    });
    expect(net.status).toBe('succeeded');
    expect(probed(net.stdout)).toEqual(LOOPBACK_ONLY);
  });
});

/**
 * A Docker engine without gVisor: a stand-in daemon on a Unix socket that answers the availability probe like
 * Docker does (ping, info with runc only, the image exists, no containers) and nothing else, so nothing can run.
 */
async function dockerWithoutRunsc(socketPath: string): Promise<Server> {
  const server = createServer((req, res) => {
    const url = (req.url ?? '').replace(/^\/v[\d.]+/, '');
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (url === '/_ping') {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.end('OK');
    } else if (url === '/info') {
      json(200, {
        Runtimes: { 'io.containerd.runc.v2': { path: 'runc' }, runc: { path: 'runc' } },
        DefaultRuntime: 'runc',
      });
    } else if (/^\/images\/.+\/json/.test(url)) json(200, { Id: 'sha256:0' });
    else if (url.startsWith('/containers/json')) json(200, []);
    else json(500, { message: `not expected here: ${req.method} ${url}` });
  });
  await new Promise<void>((resolve) => server.listen(socketPath, resolve));
  return server;
}

describe('an explicit runsc on a Docker engine without it', () => {
  let dir: string;
  let server: Server;
  let socket: string;
  const engines: EngineHarness[] = [];
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-no-runsc-'));
    socket = path.join(dir, 'docker.sock');
    server = await dockerWithoutRunsc(socket);
  });
  afterAll(async () => {
    for (const e of engines) await e.stop();
    await new Promise((r) => server.close(r));
    rmSync(dir, { recursive: true, force: true });
  });
  const start = async (runtime: string): Promise<EngineHarness> => {
    const e = await EngineHarness.start({
      DOCKER_HOST: `unix://${socket}`,
      SWITCHYARD_CONTAINER_RUNTIME: runtime,
      SWITCHYARD_POOL_MIN: '0',
    });
    engines.push(e);
    return e;
  };

  it('makes the one-off tier unavailable naming the setting, and its actions denied (TIER_UNAVAILABLE), never runc', async () => {
    const engine = await start('runsc');
    const health = (await engine.request('GET', '/health')).body;
    expect(health.tiers.container).toMatchObject({ available: false, code: 'CONTAINER_RUNTIME_UNAVAILABLE' });
    expect(health.tiers.container.reason).toMatch(
      /^SWITCHYARD_CONTAINER_RUNTIME=runsc, but the Docker engine at unix:\/\/.* has no runsc runtime/,
    );
    const ready = await engine.request('GET', '/health/ready');
    expect(ready.status).toBe(503);
    const indicators = ready.body.error.details.indicators;
    expect(indicators.container_runtime.status).toBe('down');
    expect(indicators.container_runtime.reason).toContain('SWITCHYARD_CONTAINER_RUNTIME');
    expect(indicators.docker.status).toBe('up');

    const sid = await engine.createSession();
    for (const body of [
      { type: 'code', language: 'bash', tier: 'container', code: 'uname -r' },
      { type: 'code', language: 'bash', code: 'sudo -n true; uname -r' },
    ]) {
      const r = await engine.action(sid, body);
      expect(r).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'TIER_UNAVAILABLE' } });
      expect(r.error.message).toContain('SWITCHYARD_CONTAINER_RUNTIME=runsc');
      expect(r.stdout ?? '').toBe('');
    }
  });

  it('auto on that engine takes runc, and says so', async () => {
    const engine = await start('auto');
    const health = (await engine.request('GET', '/health')).body;
    expect(health.tiers.container).toMatchObject({ available: true, details: { runtime: 'runc' } });
  });
});
