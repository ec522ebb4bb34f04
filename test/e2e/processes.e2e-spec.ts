import { EngineHarness } from '../support/engine-harness';
import { eventually } from '../support/host-probes';
import { tierRows } from '../support/sandbox-backends';
import { SseClient } from '../support/sse-client';

/** The tiers that hold processes, on each backend under test (on Kubernetes: the session pod, through its runner). */
const ROWS = tierRows(['subprocess', 'pooled'], ['pooled']);

/** Background processes through the API, in the subprocess tier's stateful sandbox and the pooled container. */
describe('background processes', () => {
  let engine: EngineHarness;
  /** The engine of the row under test: the Docker one, or one on the other backend for its rows. */
  let target: EngineHarness;

  beforeAll(async () => {
    engine = await EngineHarness.start({ SWITCHYARD_MAX_PROCESSES: '3' });
    target = engine;
  });
  afterAll(() => engine.stop());

  const proc = (sid: string, body: Record<string, unknown>): Promise<any> =>
    target.action(sid, { type: 'process', ...body });
  /** Polls the process's logs until `text` shows up; answers the whole stdout seen. */
  const logsUntil = async (sid: string, processId: string, text: string): Promise<string> => {
    let seen = '';
    const found = await eventually(
      async () => {
        const r = await proc(sid, { op: 'logs', processId });
        seen = `${r.stdout}${r.stderr}`;
        return seen.includes(text);
      },
      15_000,
      100,
    );
    if (!found) throw new Error(`"${text}" never appeared in the logs of ${processId}: ${seen}`);
    return seen;
  };

  describe.each(ROWS)('in the %s tier', (_row, tier, backend) => {
    let sid: string;
    let own: EngineHarness | undefined;
    beforeAll(async () => {
      if (backend)
        own = await EngineHarness.start({ ...(await backend.env()), SWITCHYARD_MAX_PROCESSES: '3' });
      target = own ?? engine;
      sid = await target.createSession();
    });
    afterAll(async () => {
      await target.request('DELETE', `/v1/sessions/${sid}`);
      target = engine;
      await own?.stop();
    });

    it('a background server answers a client of the same session', async () => {
      const port = tier === 'pooled' ? 8042 : 8041;
      await target.action(sid, {
        type: 'file',
        op: 'write',
        path: 'site/index.html',
        content: 'hello from the server',
      });
      const started = await proc(sid, {
        op: 'start',
        command: `python3 -u -m http.server ${port} --bind 127.0.0.1`,
        cwd: 'site',
        name: 'web',
        tier,
      });
      expect(started).toMatchObject({
        status: 'succeeded',
        tier,
        output: { process: { name: 'web', tier, running: true } },
      });
      const processId = started.output.processId;
      expect(processId).toMatch(/^prc_/);
      await logsUntil(sid, processId, 'Serving HTTP');
      const client = await target.action(sid, {
        type: 'code',
        language: 'bash',
        state: 'session',
        tier,
        code: `python3 -c "import urllib.request; print(urllib.request.urlopen('http://127.0.0.1:${port}/index.html').read().decode())"`,
      });
      expect(client).toMatchObject({ status: 'succeeded', stdout: 'hello from the server\n' });
      const py = await target.action(sid, {
        type: 'code',
        language: 'python',
        state: 'session',
        tier,
        code: `import urllib.request\nurllib.request.urlopen('http://localhost:${port}/').status`,
      });
      expect(py.output.result).toBe('200');
      // The server logged both requests.
      await logsUntil(sid, 'web', 'GET /index.html');
      const list = await proc(sid, { op: 'list' });
      expect(list.output.processes).toEqual(
        expect.arrayContaining([expect.objectContaining({ id: processId, name: 'web', running: true })]),
      );
      const stopped = await proc(sid, { op: 'stop', processId: 'web' });
      expect(stopped.output.process).toMatchObject({ running: false });
      const refused = await target.action(sid, {
        type: 'code',
        language: 'bash',
        state: 'session',
        tier,
        code: `python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:${port}/')" 2>&1 | tail -1`,
      });
      expect(refused.stdout).toContain('Connection refused');
    });

    it('stdin, exit codes, wait and signals', async () => {
      const cat = await proc(sid, { op: 'start', command: 'cat; echo done >&2; exit 3', tier });
      const id = cat.output.processId;
      await proc(sid, { op: 'write', processId: id, data: 'line one\n' });
      await logsUntil(sid, id, 'line one');
      const notYet = await proc(sid, { op: 'wait', processId: id, timeoutMs: 300 });
      expect(notYet).toMatchObject({
        status: 'timed_out',
        output: { exited: false },
        error: { code: 'PROCESS_STILL_RUNNING' },
      });
      await proc(sid, { op: 'write', processId: id, data: 'last\n', eof: true });
      const waited = await proc(sid, { op: 'wait', processId: id, timeoutMs: 10_000 });
      expect(waited).toMatchObject({
        status: 'succeeded',
        output: { exited: true, process: { running: false, exitCode: 3 } },
      });
      const logs = await proc(sid, { op: 'logs', processId: id });
      expect(logs.stdout).toBe('line one\nlast\n');
      expect(logs.stderr).toBe('done\n');
      expect(logs.output.entries[0]).toMatchObject({ seq: 1, stream: 'stdout' });
      const since = await proc(sid, { op: 'logs', processId: id, sinceSeq: logs.output.entries.at(-1).seq });
      expect(since.output.entries).toEqual([]);
      const exited = await proc(sid, { op: 'write', processId: id, data: 'x' });
      expect(exited).toMatchObject({ status: 'failed', error: { code: 'PROCESS_EXITED' } });

      const trap = await proc(sid, {
        op: 'start',
        command: "trap 'echo got-usr1' USR1; echo trapping; while true; do sleep 0.1; done",
        tier,
      });
      // A signal that comes before the trap is set ends the shell (USR1's default): wait until it is.
      await logsUntil(sid, trap.output.processId, 'trapping');
      await proc(sid, { op: 'signal', processId: trap.output.processId, signal: 'USR1' });
      await logsUntil(sid, trap.output.processId, 'got-usr1');
      await proc(sid, { op: 'stop', processId: trap.output.processId, graceMs: 500 });
    });

    it('stop kills the whole process group', async () => {
      // Two processes of one group (a pipeline: background jobs would make it medium risk, hence pooled).
      const tree = await proc(sid, { op: 'start', command: 'sleep 4711 | sleep 4712', tier });
      const seen = await target.action(sid, {
        type: 'code',
        language: 'bash',
        state: 'session',
        tier,
        code: 'sleep 0.3; ps -eo args',
      });
      expect(seen.stdout).toContain('sleep 4711');
      await proc(sid, { op: 'stop', processId: tree.output.processId, graceMs: 200 });
      const after = await target.action(sid, {
        type: 'code',
        language: 'bash',
        state: 'session',
        tier,
        code: 'ps -eo args',
      });
      expect(after.stdout).not.toContain('sleep 4711');
      expect(after.stdout).not.toContain('sleep 4712');
    });
  });

  it('streams output and the exit over SSE', async () => {
    const sid = await engine.createSession();
    const sse = await SseClient.open(`${engine.baseUrl}/v1/sessions/${sid}/events`);
    try {
      const r = await proc(sid, {
        op: 'start',
        command: 'for i in 1 2 3; do echo line$i; sleep 0.2; done',
        name: 'ticker',
      });
      const id = r.output.processId;
      const out = await sse.waitFor(
        (e) => e.event === 'process.output' && String(e.data.chunk).includes('line3'),
      );
      expect(out.data).toMatchObject({ processId: id, name: 'ticker', stream: 'stdout' });
      const exited = await sse.waitFor((e) => e.event === 'process.exited' && e.data.processId === id);
      expect(exited.data).toMatchObject({ exitCode: 0 });
    } finally {
      sse.close();
    }
  });

  it('refuses what it must: unknown processes, taken names, the limit, the one-off tier, risky stdin', async () => {
    const sid = await engine.createSession();
    const unknown = await proc(sid, { op: 'logs', processId: 'prc_nope' });
    expect(unknown).toMatchObject({ status: 'failed', error: { code: 'PROCESS_NOT_FOUND' } });
    await proc(sid, { op: 'start', command: 'sleep 600', name: 'one' });
    const taken = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'process',
      op: 'start',
      command: 'sleep 600',
      name: 'one',
    });
    // The name is the session's state, not a fault of the request: a recorded failure, not a 400.
    expect(taken.status).toBe(200);
    expect(taken.body).toMatchObject({ status: 'failed', error: { code: 'PROCESS_NAME_TAKEN' } });
    expect(taken.body.error.message).toContain('"one" is already running');
    await proc(sid, { op: 'start', command: 'sleep 600' });
    await proc(sid, { op: 'start', command: 'sleep 600' });
    const over = await proc(sid, { op: 'start', command: 'sleep 600' });
    expect(over).toMatchObject({ status: 'denied', error: { class: 'limit', code: 'PROCESS_LIMIT' } });
    expect(over.error.message).toContain('SWITCHYARD_MAX_PROCESSES');
    const oneOff = await proc(sid, { op: 'stop', processId: 'one' });
    expect(oneOff.status).toBe('succeeded');
    const container = await proc(sid, { op: 'start', command: 'sleep 1', tier: 'container' });
    expect(container).toMatchObject({ status: 'denied', error: { code: 'STATELESS_TIER' } });
    const shell = await proc(sid, { op: 'start', command: 'bash', name: 'sh' });
    const fed = await proc(sid, {
      op: 'write',
      processId: shell.output.processId,
      data: 'rm -rf / --no-preserve-root\n',
    });
    expect(fed).toMatchObject({ status: 'denied', error: { class: 'policy' } });
    const badCwd = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'process',
      op: 'start',
      command: 'true',
      cwd: '../outside',
    });
    expect(badCwd.status).toBe(400);
  });

  it('starts no more than the limit when starts race, and refuses every other one as denied PROCESS_LIMIT', async () => {
    // Eight run at once and 28 wait (the session queue holds 32): all pass the check made when they are submitted,
    // so the limit (3) is met only while they start.
    const sid = await engine.createSession({ maxConcurrentActions: 8 });
    const count = 36;
    const answers = await Promise.all(
      Array.from({ length: count }, () =>
        engine.request('POST', `/v1/sessions/${sid}/actions`, {
          type: 'process',
          op: 'start',
          command: 'sleep 600',
        }),
      ),
    );
    expect(answers.map((a) => a.status)).toEqual(Array(count).fill(200));
    const outcomes = answers.map((a) => a.body);
    const started = outcomes.filter((o) => o.status === 'succeeded');
    const refused = outcomes.filter((o) => o.status !== 'succeeded');
    expect(started).toHaveLength(3);
    expect(refused).toHaveLength(count - 3);
    for (const o of refused) {
      expect(o).toMatchObject({ status: 'denied', error: { class: 'limit', code: 'PROCESS_LIMIT' } });
      expect(o.error.message).toContain('SWITCHYARD_MAX_PROCESSES');
    }
    const list = await proc(sid, { op: 'list' });
    expect(list.output.processes.filter((p: any) => p.running)).toHaveLength(3);
    await engine.request('DELETE', `/v1/sessions/${sid}`);
  });

  it('treats a process command and its stdin as bash code: language rules and risk scoring apply', async () => {
    const sid = await engine.createSession({
      policy: {
        rules: [{ effect: 'deny', match: { language: 'bash' }, reason: 'no shell in this session' }],
      },
    });
    const start = await proc(sid, { op: 'start', command: 'sleep 600' });
    expect(start).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'POLICY_DENIED' } });
    expect(start.error.message).toContain('process_start is blocked by the session policy');
    expect(start.error.message).toContain('no shell in this session');
    // The process_start tool is the same action, refused the same way; the tool list no longer offers it.
    const call = await engine.request('POST', `/v1/sessions/${sid}/tool-calls`, {
      id: 't1',
      name: 'process_start',
      input: { command: 'h=sleep; $h 600' },
    });
    expect(call.body).toMatchObject({ is_error: true });
    expect(call.body.content).toContain('process_start is blocked by the session policy');
    const tools = (await engine.request('GET', `/v1/tools?sessionId=${sid}`)).body.tools.map(
      (t: any) => t.name,
    );
    expect(tools).toEqual(expect.arrayContaining(['python', 'process_list', 'process_logs']));
    expect(tools.filter((t: string) => ['bash', 'process_start', 'process_write'].includes(t))).toEqual([]);
    expect((await proc(sid, { op: 'list' })).output.processes).toEqual([]);
    // Scored as bash code: a critical command is refused whatever the policy.
    const free = await engine.createSession();
    const wipe = await proc(free, { op: 'start', command: 'rm -rf / --no-preserve-root' });
    expect(wipe).toMatchObject({
      status: 'denied',
      risk: { level: 'critical' },
      error: { class: 'policy', code: 'RISK_CRITICAL' },
    });
    await engine.request('DELETE', `/v1/sessions/${sid}`);
    await engine.request('DELETE', `/v1/sessions/${free}`);
  });

  it('records STARTED edges to Process nodes and RAN_IN edges to Kernel nodes in the graph', async () => {
    const sid = await engine.createSession();
    const started = await proc(sid, { op: 'start', command: 'sleep 600', name: 'bg' });
    const cell = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: 'y = 2',
      state: 'session',
    });
    const graph = (await engine.request('GET', `/v1/sessions/${sid}/graph`)).body;
    expect(graph.nodes).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ id: `process:${started.output.processId}`, label: 'Process' }),
        expect.objectContaining({ id: `kernel:${cell.output.kernel.id}`, label: 'Kernel' }),
      ]),
    );
    expect(graph.edges).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          from: started.id,
          to: `process:${started.output.processId}`,
          type: 'STARTED',
        }),
        expect.objectContaining({ from: cell.id, to: `kernel:${cell.output.kernel.id}`, type: 'RAN_IN' }),
      ]),
    );
    const failed = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code: 'raise ValueError("x")',
      state: 'session',
    });
    const context = (await engine.request('GET', `/v1/sessions/${sid}/actions/${failed.id}/context`)).body;
    expect(context.kernel).toMatchObject({ id: cell.output.kernel.id, started: false, executionCount: 2 });
  });
});
