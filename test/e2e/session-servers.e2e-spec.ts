import { EngineHarness } from '../support/engine-harness';

jest.setTimeout(120_000);

/**
 * What a session starts is reachable (issue 29, item 3): a server started by a session, as a background process or
 * with `&` in a kernel, answers 127.0.0.1:PORT from every later action of the session, whatever tier the policy
 * routes it to, except a one-off container (a new network namespace per action, by design); never from another
 * session. With the pooled tier available, a session's kernels and processes live in its pooled container and its
 * later actions run there with them; without it, in its subprocess-tier box, where its fresh actions then run too.
 */
describe('what a session starts is reachable from its later actions', () => {
  /** Ports of this file's servers; each test its own, so a slow stop cannot answer for the next. */
  const base = 20_000 + Math.floor(Math.random() * 20_000);
  /** Bash that prints the HTTP status of 127.0.0.1:port, retrying while nothing listens yet (000: no answer). */
  const curl = (port: number, retries = 30): string =>
    `curl -sS -o /dev/null -w '%{http_code}' --retry ${retries} --retry-connrefused --retry-delay 0 ` +
    `--max-time 20 http://127.0.0.1:${port}/`;
  const urllib = (port: number): string =>
    `import urllib.request\nprint(urllib.request.urlopen('http://127.0.0.1:${port}/', timeout=10).status)\n`;
  const server = (port: number): string => `python3 -u -m http.server ${port} --bind 127.0.0.1`;
  const reasons = (answer: any): string => (answer.risk?.reasons ?? []).join(' | ');

  describe('with the pooled tier (Docker)', () => {
    let engine: EngineHarness;
    beforeAll(async () => {
      engine = await EngineHarness.start({});
    });
    afterAll(async () => {
      await engine?.stop();
    });

    it('a background process lives in the pooled container, and every later action but a one-off reaches it', async () => {
      const port = base;
      const sid = await engine.createSession();
      const started = await engine.action(sid, {
        type: 'process',
        op: 'start',
        command: server(port),
        name: 'web',
      });
      expect(started).toMatchObject({
        status: 'succeeded',
        tier: 'pooled',
        output: { process: { running: true } },
      });
      expect(reasons(started)).toMatch(/live in the pooled tier while it is available/);

      // Low-risk code (it names only the loopback) routes to the subprocess tier, and runs with the server instead.
      const fresh = await engine.action(sid, { type: 'code', language: 'bash', code: curl(port) });
      expect(fresh).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: '200' });
      expect(reasons(fresh)).toMatch(
        /runs in the pooled tier rather than subprocess: the session runs kernels or background processes in the pooled tier/,
      );
      const python = await engine.action(sid, { type: 'code', language: 'python', code: urllib(port) });
      expect(python).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: '200\n' });
      const cell = await engine.action(sid, {
        type: 'code',
        language: 'python',
        state: 'session',
        code: urllib(port),
      });
      expect(cell).toMatchObject({
        status: 'succeeded',
        tier: 'pooled',
        stdout: '200\n',
        output: { kernel: { tier: 'pooled' } },
      });

      // A weaker tier asked for is raised, and the answer says why.
      const asked = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        code: curl(port),
        tier: 'subprocess',
      });
      expect(asked).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: '200' });
      expect(reasons(asked)).toMatch(/tier "subprocess" was asked for but "pooled" is this action's floor/);

      // A one-off container is a network namespace of its own: nothing listens there.
      const oneOff = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        code: curl(port, 0),
        tier: 'container',
      });
      expect(oneOff).toMatchObject({ status: 'failed', tier: 'container', exitCode: 7, stdout: '000' });

      // Another session reaches nothing of this one; it holds no state, so its code stays in the subprocess tier.
      const other = await engine.createSession();
      const stranger = await engine.action(other, { type: 'code', language: 'bash', code: curl(port, 0) });
      expect(stranger).toMatchObject({ status: 'failed', tier: 'subprocess', exitCode: 7, stdout: '000' });

      // With the process and the kernel stopped, the session's low-risk code routes as the policy says again.
      await engine.action(sid, { type: 'process', op: 'stop', processId: 'web', graceMs: 1000 });
      const stillHeld = await engine.action(sid, { type: 'code', language: 'bash', code: 'echo held' });
      expect(stillHeld).toMatchObject({ status: 'succeeded', tier: 'pooled' });
      const kernel = cell.output.kernel.id as string;
      expect((await engine.request('DELETE', `/v1/sessions/${sid}/kernels/${kernel}`)).status).toBeLessThan(
        300,
      );
      const after = await engine.action(sid, { type: 'code', language: 'bash', code: 'echo routed' });
      expect(after).toMatchObject({ status: 'succeeded', tier: 'subprocess', stdout: 'routed\n' });
    });

    it('a server started with & in a kernel answers the session’s fresh actions', async () => {
      const port = base + 1;
      const sid = await engine.createSession();
      const cell = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        state: 'session',
        code: `${server(port)} >/dev/null 2>&1 &\necho started`,
      });
      expect(cell).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: 'started\n' });
      const fresh = await engine.action(sid, { type: 'code', language: 'bash', code: curl(port) });
      expect(fresh).toMatchObject({ status: 'succeeded', tier: 'pooled', stdout: '200' });
      const kernels = await engine.request('GET', `/v1/sessions/${sid}/kernels`);
      expect(kernels.body.kernels ?? kernels.body).toEqual(
        expect.arrayContaining([expect.objectContaining({ language: 'bash', tier: 'pooled' })]),
      );
    });
  });

  describe('without the pooled tier (no Docker)', () => {
    let engine: EngineHarness;
    beforeAll(async () => {
      engine = await EngineHarness.start({
        DOCKER_HOST: 'unix:///nonexistent/switchyard-session-servers/docker.sock',
        SWITCHYARD_POOL_MIN: '0',
        SWITCHYARD_BROWSER_ENABLED: 'false',
      });
    });
    afterAll(async () => {
      await engine?.stop();
    });

    it("fresh actions run in the session's subprocess-tier box while it holds a process, and reach its server", async () => {
      const port = base + 2;
      const sid = await engine.createSession();
      const started = await engine.action(sid, {
        type: 'process',
        op: 'start',
        command: server(port),
        name: 'web',
      });
      expect(started).toMatchObject({ status: 'succeeded', tier: 'subprocess' });
      const fresh = await engine.action(sid, { type: 'code', language: 'bash', code: curl(port) });
      expect(fresh).toMatchObject({ status: 'succeeded', tier: 'subprocess', stdout: '200' });
      const python = await engine.action(sid, { type: 'code', language: 'python', code: urllib(port) });
      expect(python).toMatchObject({ status: 'succeeded', tier: 'subprocess', stdout: '200\n' });
      const node = await engine.action(sid, {
        type: 'code',
        language: 'node',
        code: `const r = await fetch('http://127.0.0.1:${port}/'); console.log(r.status);`,
      });
      expect(node).toMatchObject({ status: 'succeeded', tier: 'subprocess', stdout: '200\n' });

      // A fresh run there is still a fresh run: its stdin, its timeout, its environment, nothing it leaves running.
      const stdin = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        code: 'cat; echo " $HOME"',
        stdin: 'in',
      });
      expect(stdin).toMatchObject({ status: 'succeeded', stdout: 'in /workspace/.home\n' });
      const slow = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        code: 'sleep 4242',
        timeoutMs: 1000,
      });
      expect(slow).toMatchObject({ status: 'timed_out', tier: 'subprocess' });
      // bash's child is killed with it (the runner ends everything a run started but the session's processes).
      const ps = await engine.action(sid, { type: 'code', language: 'bash', code: 'ps -eo args' });
      expect(ps.stdout).toContain(server(port));
      expect(ps.stdout).not.toContain('sleep 4242');
      const still = await engine.action(sid, { type: 'code', language: 'bash', code: curl(port, 0) });
      expect(still).toMatchObject({ status: 'succeeded', stdout: '200' });

      // Another session: its own sandboxes, nothing listening.
      const other = await engine.createSession();
      const stranger = await engine.action(other, { type: 'code', language: 'bash', code: curl(port, 0) });
      expect(stranger).toMatchObject({ status: 'failed', tier: 'subprocess', exitCode: 7, stdout: '000' });
    });
  });
});
