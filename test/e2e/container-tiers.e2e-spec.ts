import { execFileSync } from 'node:child_process';
import { EngineHarness } from '../support/engine-harness';

/** Container tiers through the API, against the real Docker engine `npm test` starts. */
describe('container tiers (real Docker)', () => {
  let engine: EngineHarness;
  let a: string;
  let b: string;
  /** The one-off tier's Docker runtime (`runsc`: gVisor, when the Docker engine has it). */
  let oneOffRuntime: string;
  const run = (sid: string, tier: string, language: string, code: string): Promise<any> =>
    engine.action(sid, { type: 'code', language, code, tier, timeoutMs: 20_000 });
  const containerExists = (id: string): boolean => {
    try {
      execFileSync('docker', ['inspect', id], { stdio: 'ignore' });
      return true;
    } catch {
      return false;
    }
  };

  beforeAll(async () => {
    engine = await EngineHarness.start();
    oneOffRuntime = (await engine.request('GET', '/health')).body.tiers.container.details.runtime;
    a = await engine.createSession();
    b = await engine.createSession();
  });
  afterAll(() => engine.stop());

  it.each([
    ['pooled', 'python', 'print("py")', 'py\n'],
    ['pooled', 'node', 'console.log("js")', 'js\n'],
    ['pooled', 'bash', 'echo sh', 'sh\n'],
    ['container', 'python', 'print("py")', 'py\n'],
    ['container', 'node', 'console.log("js")', 'js\n'],
    ['container', 'bash', 'echo sh', 'sh\n'],
  ])('%s tier runs %s', async (tier, language, code, stdout) => {
    const r = await run(a, tier, language, code);
    expect(r).toMatchObject({ status: 'succeeded', tier, stdout, exitCode: 0 });
  });

  it('shares one workspace between the file API, pooled code, one-off containers and the subprocess tier', async () => {
    await engine.action(a, { type: 'file', op: 'write', path: 'from-api.txt', content: 'api' });
    const pooled = await run(a, 'pooled', 'bash', 'cat from-api.txt; echo pooled > from-pooled.txt');
    expect(pooled.stdout).toBe('api');
    const read = await engine.action(a, { type: 'file', op: 'read', path: 'from-pooled.txt' });
    expect(read.output.content).toBe('pooled\n');
    const oneOff = await run(a, 'container', 'bash', 'cat from-pooled.txt; echo oneoff > from-oneoff.txt');
    expect(oneOff.stdout).toBe('pooled\n');
    const sub = await run(a, 'subprocess', 'bash', 'cat from-oneoff.txt');
    expect(sub.stdout).toBe('oneoff\n');
    const back = await run(a, 'pooled', 'bash', 'cat from-oneoff.txt');
    expect(back.stdout).toBe('oneoff\n');
  });

  it('keeps a session pooled state between actions, and never shows it to another session', async () => {
    await run(a, 'pooled', 'bash', 'echo secret-a > /tmp/state.txt; sleep 30 &');
    const again = await run(a, 'pooled', 'bash', 'cat /tmp/state.txt');
    expect(again.stdout).toBe('secret-a\n');
    const other = await run(b, 'pooled', 'bash', 'cat /tmp/state.txt 2>&1; ls /workspace; ps -eo args');
    expect(other.stdout).not.toContain('secret-a');
    expect(other.stdout).not.toContain('from-api.txt');
    expect(other.stdout).not.toContain('sleep 30');
    const hostA = (await run(a, 'pooled', 'bash', 'hostname')).stdout.trim();
    const hostB = (await run(b, 'pooled', 'bash', 'hostname')).stdout.trim();
    expect(hostA).not.toBe(hostB);
  });

  it.each(['pooled', 'container'])(
    '%s: no capabilities, no new privileges, seccomp, non-root, no Docker socket',
    async (tier) => {
      // `mount`, `unshare` and naming docker.sock score as privilege escalation (high risk), which the policy keeps
      // out of the pooled tier: the socket is looked for by listing the run directories instead.
      const escalation =
        tier === 'container'
          ? '; mount -t tmpfs x /mnt 2>&1 || echo mount-failed; unshare -r true 2>&1 || echo unshare-failed'
          : '';
      const r = await run(
        a,
        tier,
        'bash',
        `grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status; setpriv -d | grep no_new_privs; id -u; ` +
          `ls -a /var/run/ /run/ 2>&1${escalation}`,
      );
      expect(r.stdout).toMatch(/CapEff:\s+0000000000000000/);
      // The kernel's own answer (prctl PR_GET_NO_NEW_PRIVS); gVisor's /proc/self/status has no NoNewPrivs line.
      expect(r.stdout).toMatch(/no_new_privs:\s+1/);
      if (tier === 'pooled' || oneOffRuntime !== 'runsc') expect(r.stdout).toMatch(/NoNewPrivs:\s+1/);
      expect(r.stdout).toMatch(/Seccomp:\s+2/);
      expect(r.stdout).toMatch(/^10001$/m);
      expect(r.stdout).not.toContain('docker.sock');
      if (tier === 'container') {
        expect(r.stdout).toContain('mount-failed');
        expect(r.stdout).toContain('unshare-failed');
      }
    },
  );

  it.each(['pooled', 'container'])('%s: no network', async (tier) => {
    const r = await run(
      a,
      tier,
      'python',
      'import socket\ntry:\n    socket.create_connection(("127.0.0.1", 80), timeout=1)\n    print("connected")\nexcept OSError as e:\n    print("refused", type(e).__name__)',
    );
    expect(r.stdout).toMatch(/^refused/);
  });

  it('records the container each action ran in: a Sandbox node per container, RAN_IN edges', async () => {
    const s = await engine.createSession();
    const p1 = await run(s, 'pooled', 'bash', 'hostname');
    const p2 = await run(s, 'pooled', 'bash', 'hostname');
    const one = await run(s, 'container', 'bash', 'hostname');
    const sub = await run(s, 'subprocess', 'bash', 'true');
    const pooledId = p1.stdout.trim();
    expect(p2.stdout.trim()).toBe(pooledId);

    const graph = (await engine.request('GET', `/v1/sessions/${s}/graph`)).body;
    const sandboxes = graph.nodes.filter((n: any) => n.label === 'Sandbox');
    expect(sandboxes).toHaveLength(2);
    const pooledNode = sandboxes.find((n: any) => n.properties.tier === 'pooled');
    const oneOffNode = sandboxes.find((n: any) => n.properties.tier === 'container');
    // Docker's hostname is the short container id.
    expect(pooledNode.properties.containerId.startsWith(pooledId)).toBe(true);
    expect(oneOffNode.properties.containerId.startsWith(one.stdout.trim())).toBe(true);
    const ranIn = graph.edges
      .filter((e: any) => e.type === 'RAN_IN')
      .map((e: any) => `${e.from}->${e.to}`)
      .sort();
    expect(ranIn).toEqual(
      [`${p1.id}->${pooledNode.id}`, `${p2.id}->${pooledNode.id}`, `${one.id}->${oneOffNode.id}`].sort(),
    );
    expect(ranIn.some((e: string) => e.startsWith(sub.id))).toBe(false);
    const view = (await engine.request('GET', `/v1/sessions/${s}/actions/${one.id}`)).body;
    expect(view.sandbox).toEqual({
      tier: 'container',
      containerId: oneOffNode.properties.containerId,
      runtime: oneOffRuntime,
    });
  });

  it('deleting a session destroys its pooled container', async () => {
    const s = await engine.createSession();
    const id = (await run(s, 'pooled', 'bash', 'hostname')).stdout.trim();
    expect(containerExists(id)).toBe(true);
    expect((await engine.request('DELETE', `/v1/sessions/${s}`)).status).toBe(204);
    expect(containerExists(id)).toBe(false);
  });
});
