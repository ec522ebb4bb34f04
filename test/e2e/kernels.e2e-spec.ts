import { EngineHarness } from '../support/engine-harness';
import { containerExists, eventually, mountDevice, sandboxedProcessesOf } from '../support/host-probes';
import { tierRows } from '../support/sandbox-backends';

/** The tiers that hold kernels, on each backend under test (on Kubernetes: the session pod, through its runner). */
const ROWS = tierRows(['subprocess', 'pooled'], ['pooled']);

/**
 * Session kernels through the API, in both tiers that hold state: the subprocess tier's stateful bubblewrap sandbox
 * and the session's pooled container (real bubblewrap, real Docker).
 */
describe('session kernels (state: "session")', () => {
  let engine: EngineHarness;
  /** The engine of the row under test: the Docker one, or one on the other backend for its rows. */
  let target: EngineHarness;

  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_KERNEL_INTERRUPT_GRACE_MS: '1500' });
    target = engine;
  });
  afterAll(() => engine.stop());

  const cell = (
    sid: string,
    language: string,
    code: string,
    extra: Record<string, unknown> = {},
  ): Promise<any> =>
    target.action(sid, { type: 'code', language, code, state: 'session', timeoutMs: 20_000, ...extra });

  describe.each(ROWS)('in the %s tier', (_row, tier, backend) => {
    let sid: string;
    const run = (language: string, code: string, extra: Record<string, unknown> = {}) =>
      cell(sid, language, code, { tier, ...extra });
    /** Cells in a session of the test's own, so it neither sees nor leaves kernels of the others. */
    const own =
      (session: string) =>
      (language: string, code: string, extra: Record<string, unknown> = {}) =>
        cell(session, language, code, { tier, ...extra });

    let rowEngine: EngineHarness | undefined;
    beforeAll(async () => {
      if (backend)
        rowEngine = await EngineHarness.start({
          ...(await backend.env()),
          SWITCHYARD_KERNEL_INTERRUPT_GRACE_MS: '1500',
        });
      target = rowEngine ?? engine;
      sid = await target.createSession();
    });
    afterAll(async () => {
      await target.request('DELETE', `/v1/sessions/${sid}`);
      target = engine;
      await rowEngine?.stop();
    });

    it('python keeps variables, imports and functions, and answers the last expression like a notebook', async () => {
      const first = await run(
        'python',
        'import math\nx = 41\ndef twice(v):\n    return 2 * v\nprint("defined")',
      );
      expect(first).toMatchObject({ status: 'succeeded', tier, stdout: 'defined\n', exitCode: 0 });
      expect(first.output.kernel).toMatchObject({
        language: 'python',
        tier,
        executionCount: 1,
        started: true,
      });
      const second = await run('python', 'print(x + 1)\ntwice(math.floor(2.5))');
      expect(second).toMatchObject({ status: 'succeeded', stdout: '42\n' });
      expect(second.output).toMatchObject({
        result: '4',
        kernel: { id: first.output.kernel.id, executionCount: 2, started: false },
      });
      const error = await run('python', 'undefined_name');
      expect(error).toMatchObject({ status: 'failed', exitCode: 1 });
      expect(error.stderr).toContain("NameError: name 'undefined_name' is not defined");
      expect((await run('python', 'x')).output.result).toBe('41');
    });

    it('bash `exit 1` ends the call, not the shell: variables and cwd stay, and the exit code is 1', async () => {
      const run = own(await target.createSession());
      await run('bash', 'mkdir -p exit-probe && cd exit-probe && KEPT=yes');
      const exited = await run('bash', 'echo before; exit 1; echo after');
      expect(exited).toMatchObject({ status: 'failed', exitCode: 1, stdout: 'before\n' });
      expect(exited.output.kernel).toMatchObject({ started: false });
      expect(exited.output.kernel.stateLost).toBeUndefined();
      const next = await run('bash', 'echo "$KEPT $(basename "$PWD")"');
      expect(next).toMatchObject({ status: 'succeeded', stdout: 'yes exit-probe\n' });
      expect(next.output.kernel).toMatchObject({ id: exited.output.kernel.id, started: false });
    });

    it('a bash call that ends the shell says its state is lost, and the next call says it began a fresh one', async () => {
      const run = own(await target.createSession());
      const before = await run('bash', 'GONE=soon');
      const ended = await run('bash', 'exec true');
      expect(ended.output.kernel).toMatchObject({ id: before.output.kernel.id, stateLost: true });
      const next = await run('bash', 'echo "[${GONE-}]"');
      expect(next).toMatchObject({ status: 'succeeded', stdout: '[]\n' });
      expect(next.output.kernel).toMatchObject({
        started: true,
        reset: { reason: 'died', message: 'its process ended' },
      });
      expect(next.output.kernel.id).not.toBe(before.output.kernel.id);
      // Told once: the cell after that runs in the new kernel with nothing to report.
      const again = await run('bash', 'true');
      expect(again.output.kernel).toMatchObject({ id: next.output.kernel.id, started: false });
      expect(again.output.kernel.reset).toBeUndefined();
    });

    it('node waits for a cell’s un-awaited promises, and output printed later opens the next cell', async () => {
      const run = own(await target.createSession());
      const timed = await run(
        'node',
        "new Promise((r) => setTimeout(r, 150)).then(() => console.log('settled')); 'sent'",
      );
      expect(timed).toMatchObject({ status: 'succeeded', stdout: 'settled\n' });
      expect(timed.output.result).toBe("'sent'");
      await run('node', "setTimeout(() => console.log('late'), 100); 1");
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await run('node', "console.log('now')")).toMatchObject({ stdout: 'late\nnow\n' });
      // A fetch is network code: the policy routes it to the pooled tier or stronger.
      if (tier !== 'pooled') return;
      const server = await run(
        'node',
        "const http = require('node:http');\n" +
          "const server = http.createServer((q, s) => setTimeout(() => s.end('hi'), 200));\n" +
          "await new Promise((r) => server.listen(0, '127.0.0.1', r));\n" +
          'const url = `http://127.0.0.1:${server.address().port}/`;',
      );
      expect(server).toMatchObject({ status: 'succeeded' });
      const fetched = await run('node', 'fetch(url).then((r) => console.log(r.status)); "sent"');
      expect(fetched).toMatchObject({ status: 'succeeded', stdout: '200\n' });
      expect(fetched.output.result).toBe("'sent'");
      const awaited = await run('node', 'const r = await fetch(url); await r.text()');
      expect(awaited.output.result).toBe("'hi'");
    });

    it('node keeps declarations, awaits at top level and answers the last expression', async () => {
      const first = await run(
        'node',
        'const base = 40;\nlet n = 1;\nfunction add(a, b) { return a + b; }\n"ok"',
      );
      expect(first).toMatchObject({
        status: 'succeeded',
        output: { result: "'ok'", kernel: { language: 'node', started: true } },
      });
      const second = await run(
        'node',
        'const later = await new Promise((r) => setTimeout(() => r(1), 50));\nadd(base, n + later)',
      );
      expect(second).toMatchObject({
        status: 'succeeded',
        output: { result: '42', kernel: { started: false } },
      });
      // Re-running a cell that declares with const does not fail: declarations may be repeated, as in a REPL.
      expect((await run('node', 'const base = 1; base')).output.result).toBe('1');
      const thrown = await run('node', 'throw new Error("boom")');
      expect(thrown.status).toBe('failed');
      expect(thrown.stderr).toContain('boom');
    });

    it('bash keeps the working directory, exported variables and functions', async () => {
      await run(
        'bash',
        'mkdir -p deep/er && cd deep/er && export GREETING=hi && greet() { echo "$GREETING $1"; }',
      );
      const r = await run('bash', 'pwd; greet there; false');
      expect(r).toMatchObject({ status: 'failed', exitCode: 1, stdout: '/workspace/deep/er\nhi there\n' });
      expect(r.output.kernel).toMatchObject({ language: 'bash', executionCount: 2, started: false });
    });

    it('a timeout interrupts the cell and keeps the state; a cell that ignores the interrupt loses it', async () => {
      await run('python', 'kept = "yes"');
      const slow = await run('python', 'import time\ntime.sleep(60)', { timeoutMs: 1500 });
      expect(slow).toMatchObject({ status: 'timed_out', error: { class: 'timeout' } });
      expect(slow.error.message).toContain('keeps its state');
      expect((await run('python', 'kept')).output).toMatchObject({
        result: "'yes'",
        kernel: { started: false },
      });

      const stubborn = await run(
        'python',
        'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\ntime.sleep(60)',
        { timeoutMs: 1000 },
      );
      expect(stubborn).toMatchObject({ status: 'timed_out', output: { kernel: { stateLost: true } } });
      expect(stubborn.error.message).toContain('state in it is lost');
      const after = await run('python', "'kept' in globals()");
      expect(after.output).toMatchObject({
        result: 'False',
        kernel: { started: true, executionCount: 1, reset: { reason: 'died' } },
      });
    });

    it('interrupt stops the running cell and keeps the state; restart clears it; delete ends the kernel', async () => {
      const first = await run('bash', 'COUNTER=7; cd /tmp');
      const kernelId = first.output.kernel.id;
      const submitted = await target.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'while true; do sleep 1; done',
        state: 'session',
        tier,
        wait: false,
      });
      expect(submitted.status).toBe(202);
      expect(
        await eventually(async () => {
          const k = await target.request('GET', `/v1/sessions/${sid}/kernels/${kernelId}`);
          return k.body.busy === true;
        }, 10_000),
      ).toBe(true);
      const interrupted = await target.request('POST', `/v1/sessions/${sid}/kernels/${kernelId}/interrupt`);
      expect(interrupted).toMatchObject({ status: 200, body: { kernelId, running: true } });
      let looped: any;
      expect(
        await eventually(async () => {
          looped = (await target.request('GET', `/v1/sessions/${sid}/actions/${submitted.body.id}`)).body;
          return looped.status !== 'running';
        }, 10_000),
      ).toBe(true);
      expect(looped).toMatchObject({ status: 'cancelled', error: { code: 'KERNEL_INTERRUPTED' } });
      expect((await run('bash', 'echo $COUNTER $(pwd)')).stdout).toBe('7 /tmp\n');

      const listed = await target.request('GET', `/v1/sessions/${sid}/kernels`);
      expect(listed.body.kernels.map((k: any) => k.id)).toContain(kernelId);
      const restarted = await target.request('POST', `/v1/sessions/${sid}/kernels/${kernelId}/restart`);
      expect(restarted).toMatchObject({
        status: 200,
        body: { id: kernelId, executionCount: 0, busy: false },
      });
      const fresh = await run('bash', 'echo "[$COUNTER]" $(pwd)');
      expect(fresh.stdout).toBe('[] /workspace\n');
      expect(fresh.output.kernel).toMatchObject({ id: kernelId, executionCount: 1 });

      expect((await target.request('DELETE', `/v1/sessions/${sid}/kernels/${kernelId}`)).status).toBe(204);
      expect((await target.request('GET', `/v1/sessions/${sid}/kernels/${kernelId}`)).status).toBe(404);
      const next = await run('bash', 'echo again');
      expect(next.output.kernel.id).not.toBe(kernelId);
      expect(next.output.kernel.started).toBe(true);
      // Stopped on request: nothing was lost unasked.
      expect(next.output.kernel.reset).toBeUndefined();
    });

    it('an out-of-memory kernel is replaced and the next answer says it started fresh', async () => {
      await run('python', 'before = 1');
      const oom = await run('python', 'hog = bytearray(2 * 1024 ** 3)', { timeoutMs: 30_000 });
      expect(oom).toMatchObject({ status: 'failed', error: { class: 'limit', code: 'OUT_OF_MEMORY' } });
      expect(oom.output.kernel.stateLost).toBe(true);
      const after = await run('python', "'before' in globals()");
      expect(after.output).toMatchObject({ result: 'False', kernel: { started: true } });
    });
  });

  it('a subprocess kernel that fills /tmp with empty files ends at the memory limit (OUT_OF_MEMORY), says its state is lost, and the session works on', async () => {
    // The bubblewrap /tmp is a tmpfs capped in bytes, not in inodes: each empty file's inode and dentry are kernel
    // memory charged to the session sandbox's cgroup, and killing processes frees none of it, so the OOM killer takes
    // the kernel and then the runner: the whole sandbox ends. That is the memory limit, as for a fresh run.
    const sid = await engine.createSession();
    try {
      const first = await cell(sid, 'python', 'before = 1\nopen("kept.txt", "w").write("kept")', {
        tier: 'subprocess',
      });
      expect(first).toMatchObject({ status: 'succeeded', output: { kernel: { started: true } } });
      const fill =
        'import os\nos.mkdir("/tmp/inodes")\nn = 0\nwhile True:\n' +
        '    open("/tmp/inodes/%d" % n, "w").close()\n    n += 1';
      const r = await cell(sid, 'python', fill, { tier: 'subprocess', timeoutMs: 90_000 });
      expect(r).toMatchObject({
        status: 'failed',
        tier: 'subprocess',
        error: { class: 'limit', code: 'OUT_OF_MEMORY' },
        output: { kernel: { id: first.output.kernel.id, stateLost: true } },
      });
      expect(r.error.message).toMatch(/MiB limit of the session's subprocess sandbox/);
      expect(r.error.message).toContain('/tmp');
      expect(r.error.message).toContain('state in it is lost');
      // A fresh kernel in a fresh sandbox: no state, an empty /tmp, the workspace as it was.
      const after = await cell(
        sid,
        'python',
        "import os\n('before' in globals(), os.path.exists('/tmp/inodes'), open('kept.txt').read())",
        { tier: 'subprocess' },
      );
      expect(after).toMatchObject({
        status: 'succeeded',
        output: { result: "(False, False, 'kept')", kernel: { started: true } },
      });
      expect(after.output.kernel.id).not.toBe(first.output.kernel.id);
    } finally {
      await engine.request('DELETE', `/v1/sessions/${sid}`);
    }
  }, 150_000);

  it('two sessions never see each other’s kernels', async () => {
    const a = await engine.createSession();
    const b = await engine.createSession();
    await cell(a, 'python', 'secret = "a-only"');
    const other = await cell(b, 'python', "'secret' in globals()");
    expect(other.output.result).toBe('False');
    const kernelOfA = (await engine.request('GET', `/v1/sessions/${a}/kernels`)).body.kernels[0].id;
    expect((await engine.request('POST', `/v1/sessions/${b}/kernels/${kernelOfA}/restart`)).status).toBe(404);
  });

  it('a riskier cell never runs in a weaker kernel: it starts one in the tier its risk needs', async () => {
    const sid = await engine.createSession();
    // A session's kernels start in the pooled tier while it is available; one asked for in the subprocess tier
    // starts there.
    const low = await cell(sid, 'python', 'x = 1\nx', { tier: 'subprocess' });
    expect(low.output.kernel).toMatchObject({ tier: 'subprocess', started: true });
    // Network code to a public host is medium risk: pooled tier, never the subprocess kernel.
    const medium = await cell(sid, 'python', "import socket\nhost = 'example.com'\n'x' in globals()");
    expect(medium).toMatchObject({
      tier: 'pooled',
      output: { result: 'False', kernel: { tier: 'pooled', started: true } },
    });
    expect(medium.output.note).toContain(low.output.kernel.id);
    // A low-risk cell now runs in the strongest kernel the session has, so its state stays in one place.
    const again = await cell(sid, 'python', 'host');
    expect(again).toMatchObject({
      tier: 'pooled',
      output: { result: "'example.com'", kernel: { id: medium.output.kernel.id } },
    });
    // The one-off tier holds no state.
    const oneOff = await cell(sid, 'python', 'print(1)', { tier: 'container' });
    expect(oneOff).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'STATELESS_TIER' } });
  });

  it('refuses stdin with a kernel, naming the field, and records nothing', async () => {
    const sid = await engine.createSession();
    const res = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      code: 'input()',
      state: 'session',
      stdin: 'x',
    });
    expect(res.status).toBe(400);
    expect(JSON.stringify(res.body)).toContain('stdin');
    expect((await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions).toEqual([]);
  });

  it('streams a cell’s output over SSE as it comes', async () => {
    const sid = await engine.createSession();
    const { SseClient } = await import('../support/sse-client');
    const sse = await SseClient.open(`${engine.baseUrl}/v1/sessions/${sid}/events`);
    try {
      const done = cell(
        sid,
        'python',
        'import time\nfor i in range(3):\n    print("tick", i, flush=True)\n    time.sleep(0.3)',
      );
      const first = await sse.waitFor(
        (e) => e.event === 'action.output' && String(e.data.chunk).includes('tick 0'),
      );
      const result = await done;
      expect(first.receivedAt).toBeLessThan(Date.now() - 300);
      expect(result.stdout).toBe('tick 0\ntick 1\ntick 2\n');
      await sse.waitFor((e) => e.event === 'kernel.started' && e.data.language === 'python');
    } finally {
      sse.close();
    }
  });

  it('python is on PATH wherever python3 is, in every tier', async () => {
    const sid = await engine.createSession();
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await engine.action(sid, {
        type: 'code',
        language: 'bash',
        code: 'python -c "print(6*7)"',
        tier,
      });
      expect({ tier, ...r }).toMatchObject({ tier, status: 'succeeded', stdout: '42\n' });
    }
  });

  it('session delete and engine shutdown leave no kernel behind', async () => {
    const own = await EngineHarness.start();
    const open = async () => {
      const sid = await own.createSession();
      await own.action(sid, {
        type: 'code',
        language: 'python',
        code: 'x = 1',
        state: 'session',
        tier: 'subprocess',
      });
      const pooled = await own.action(sid, {
        type: 'code',
        language: 'node',
        code: '1',
        state: 'session',
        tier: 'pooled',
      });
      // A pooled kernel's cell ran in the session's container: the action names it.
      const containerId: string = (await own.request('GET', `/v1/sessions/${sid}/actions/${pooled.id}`)).body
        .sandbox.containerId;
      expect(await containerExists(containerId)).toBe(true);
      const device = mountDevice(own.workspaceOf(sid));
      expect(sandboxedProcessesOf(sid, device).length).toBeGreaterThan(0);
      return { sid, device, containerId };
    };
    const gone = async ({
      sid,
      device,
      containerId,
    }: {
      sid: string;
      device?: string;
      containerId: string;
    }) => {
      expect(await eventually(() => sandboxedProcessesOf(sid, device).length === 0, 10_000)).toBe(true);
      expect(await eventually(async () => !(await containerExists(containerId)), 10_000)).toBe(true);
    };
    try {
      const deleted = await open();
      expect((await own.request('DELETE', `/v1/sessions/${deleted.sid}`)).status).toBe(204);
      expect((await own.request('GET', `/v1/sessions/${deleted.sid}/kernels`)).status).toBe(404);
      await gone(deleted);
      const atShutdown = await open();
      await own.stop();
      await gone(atShutdown);
    } finally {
      await own.stop();
    }
  });
});
