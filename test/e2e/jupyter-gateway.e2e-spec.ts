import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import { fieldsOf } from '../support/error-body';
import { eventually } from '../support/host-probes';
import {
  JUPYTER_SCRIPTS,
  JupyterServer,
  jupyterScript,
  requireJupyterClients,
  type ServerRun,
  streamOf,
  typesOf,
  upgrade,
  channels,
} from '../support/jupyter-clients';

/**
 * The Jupyter protocol of a session, driven by real, pinned Jupyter clients from the client venv
 * (`bash scripts/client-tools.sh`): nbclient through jupyter_server's GatewayKernelManager, and a real
 * `jupyter server --gateway-url=…` whose own REST API and kernel WebSocket (JupyterLab's path) a script drives. One
 * engine (with an API key) and one Jupyter server for the file; everything on 127.0.0.1.
 */
const KEY = 'jupyter-key-0123456789abcdef';
const SERVER_TOKEN = randomBytes(16).toString('hex');

describe('the Jupyter protocol: any Jupyter client drives a session’s routed, recorded kernels', () => {
  let engine: EngineHarness;
  let home: string;
  let server: JupyterServer;
  /** The session `jupyter server` is the gateway client of: bash is refused there, node cells wait for approval. */
  let serverSid: string;

  beforeAll(async () => {
    requireJupyterClients();
    home = mkdtempSync(path.join(os.tmpdir(), 'switchyard-jupyter-'));
    engine = (
      await EngineHarness.start({
        SWITCHYARD_API_KEYS: KEY,
        // nbclient's GatewayKernelClient opens its WebSocket without the key (see docs/jupyter.md).
        SWITCHYARD_JUPYTER_KERNEL_ID_AUTH: 'true',
        SWITCHYARD_KERNEL_INTERRUPT_GRACE_MS: '2000',
      })
    ).as(KEY);
    serverSid = await engine.createSession({
      policy: {
        rules: [
          { effect: 'deny', match: { tool: 'bash' }, reason: 'no shell in this notebook session' },
          { effect: 'ask', match: { tool: 'node' }, reason: 'node cells are reviewed' },
        ],
      },
    });
    server = await JupyterServer.start(home, `${engine.baseUrl}/v1/sessions/${serverSid}/jupyter`, {
      key: KEY,
      token: SERVER_TOKEN,
    });
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
    await engine?.stop();
    if (home) rmSync(home, { recursive: true, force: true });
  });

  const serverRun = (plan: Record<string, unknown>, timeoutMs = 90_000): Promise<ServerRun> =>
    jupyterScript<ServerRun>(
      home,
      'server_kernel.py',
      [JSON.stringify({ server: server.url, token: SERVER_TOKEN, timeout: 60, ...plan })],
      timeoutMs,
    );

  it('answers Jupyter’s REST (kernelspecs, kernels) with the key in either scheme; 401 without it; 404 for an unknown session or kernel', async () => {
    const sid = await engine.createSession();
    const base = `/v1/sessions/${sid}/jupyter/api`;
    const token = { headers: { authorization: `token ${KEY}` } };
    const anonymous = async (urlPath: string, headers: Record<string, string> = {}) => {
      engine.as(undefined);
      try {
        return await engine.request('GET', urlPath, undefined, { headers });
      } finally {
        engine.as(KEY);
      }
    };

    const specs = await anonymous(`${base}/kernelspecs`, token.headers);
    expect(specs.status).toBe(200);
    expect(specs.body).toMatchObject({
      default: 'python3',
      kernelspecs: {
        python3: { name: 'python3', spec: { language: 'python', argv: [] }, resources: {} },
        javascript: { name: 'javascript', spec: { language: 'javascript' } },
        bash: { name: 'bash', spec: { language: 'bash' } },
      },
    });
    expect((await engine.request('GET', `${base}/kernelspecs/javascript`)).body.spec.display_name).toContain(
      'Node.js',
    );
    expect((await engine.request('GET', `${base}/kernelspecs/ruby`)).status).toBe(404);

    const missing = await anonymous(`${base}/kernelspecs`);
    expect(missing.status).toBe(401);
    expect(missing.body.error.code).toBe('UNAUTHENTICATED');
    expect(missing.headers.get('www-authenticate')).toContain('Bearer');
    expect(
      (await anonymous(`${base}/kernels`, { authorization: 'token not-a-key-of-this-engine' })).status,
    ).toBe(401);
    const unknownSession = await engine.request(
      'GET',
      '/v1/sessions/ses_0123456789abcdef/jupyter/api/kernels',
    );
    expect(unknownSession.status).toBe(404);
    expect(unknownSession.body.error.code).toBe('NOT_FOUND');

    const started = await engine.request('POST', `${base}/kernels`, {
      name: 'bash',
      env: { KERNEL_USERNAME: 'x' },
    });
    expect(started.status).toBe(201);
    expect(started.body).toEqual({
      id: expect.stringMatching(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/),
      name: 'bash',
      last_activity: expect.any(String),
      execution_state: 'idle',
      connections: 0,
    });
    const id: string = started.body.id;
    expect((await engine.request('GET', `${base}/kernels`)).body).toEqual([started.body]);
    expect((await engine.request('GET', `${base}/kernels/${id}`)).body).toMatchObject({ id, name: 'bash' });
    const badName = await engine.request('POST', `${base}/kernels`, { name: 'ruby' });
    expect(badName.status).toBe(400);
    expect(badName.body.error.fields.map((f: any) => f.path)).toEqual(['name']);
    const badEnv = await engine.request('POST', `${base}/kernels`, { env: { KERNEL_A: 1, KERNEL_B: 'b' } });
    expect([badEnv.status, badEnv.body.error.fields.map((f: any) => f.path)]).toEqual([
      400,
      ['env.KERNEL_A'],
    ]);
    const unknownKernel = await engine.request('GET', `${base}/kernels/${randomUUID()}`);
    expect(unknownKernel.status).toBe(404);
    expect(unknownKernel.body.error.message).toContain('Jupyter kernel');

    // The kernel's WebSocket: the same key, the same answers.
    const ws = `${engine.baseUrl.replace('http', 'ws')}${base}/kernels`;
    expect(await upgrade(`${ws}/${id}/channels`, { authorization: `token ${KEY}` })).toEqual({
      opened: true,
    });
    expect(await upgrade(`${ws}/${id}/channels`, { authorization: `Bearer ${KEY}` })).toEqual({
      opened: true,
    });
    const wrongKey = await upgrade(`${ws}/${id}/channels`, {
      authorization: 'token not-a-key-of-this-engine',
    });
    expect(wrongKey).toMatchObject({
      opened: false,
      status: 401,
      body: { error: { code: 'UNAUTHENTICATED' } },
      challenge: expect.stringContaining('invalid_token'),
    });
    // Without a key, only a live kernel's id stands for it (SWITCHYARD_JUPYTER_KERNEL_ID_AUTH): an unknown id is a 401.
    expect(await upgrade(`${ws}/${id}/channels`, {})).toEqual({ opened: true });
    expect(await upgrade(`${ws}/${randomUUID()}/channels`, {})).toMatchObject({ opened: false, status: 401 });
    expect(await upgrade(`${ws}/${randomUUID()}/channels`, { authorization: `token ${KEY}` })).toMatchObject({
      opened: false,
      status: 404,
      body: { error: { code: 'NOT_FOUND' } },
    });
    expect(
      await upgrade(`${ws}/${id}/channels`, {
        authorization: `token ${KEY}`,
        origin: 'https://elsewhere.example',
      }),
    ).toMatchObject({ opened: false, status: 403, body: { error: { code: 'CROSS_ORIGIN' } } });

    // Messages in Jupyter's JSON framing: a request without a channel is a shell request, answered between busy and
    // idle; a binary frame, and JSON that is no message, are dropped; a frame that is not JSON closes the socket.
    const first = await channels(`${ws}/${id}/channels`, { authorization: `token ${KEY}` });
    first.send(Buffer.from([1, 2, 3]), { binary: true });
    first.send(JSON.stringify({ header: 3 }));
    first.send(JSON.stringify({ header: { msg_id: 'm1', msg_type: 'kernel_info_request', username: 'u' } }));
    expect(await first.until((m) => m.msg_type === 'status' && m.content.execution_state === 'idle')).toBe(
      true,
    );
    expect(first.received.map((m) => `${m.channel}:${m.msg_type}`)).toEqual([
      'iopub:status',
      'shell:kernel_info_reply',
      'iopub:status',
    ]);
    expect(first.received[1]).toMatchObject({
      parent_header: { msg_id: 'm1', username: 'u' },
      content: { status: 'ok', protocol_version: '5.3', language_info: { name: 'bash' } },
    });
    first.send('not json');
    expect(await first.closed).toBe(1008);
    // Deleting the kernel closes its connections.
    const second = await channels(`${ws}/${id}/channels`, { authorization: `token ${KEY}` });
    expect((await engine.request('DELETE', `${base}/kernels/${id}`)).status).toBe(204);
    expect(await second.closed).toBe(1001);
    expect((await engine.request('GET', `${base}/kernels/${id}`)).status).toBe(404);
    expect((await engine.request('GET', `${base}/kernels`)).body).toEqual([]);
  });

  it('gives a kernel’s cells the timeout its KERNEL_SWITCHYARD_TIMEOUT_MS names, and refuses a bad one naming it', async () => {
    const sid = await engine.createSession();
    const base = `/v1/sessions/${sid}/jupyter/api`;
    const bad = await engine.request('POST', `${base}/kernels`, {
      name: 'python3',
      env: { KERNEL_SWITCHYARD_TIMEOUT_MS: '2 minutes' },
    });
    expect(bad.status).toBe(400);
    expect(fieldsOf(bad.body)).toEqual(['env.KERNEL_SWITCHYARD_TIMEOUT_MS']);
    const started = await engine.request('POST', `${base}/kernels`, {
      name: 'python3',
      env: { KERNEL_SWITCHYARD_TIMEOUT_MS: '700', KERNEL_USERNAME: 'ignored' },
    });
    expect(started.status).toBe(201);
    const ws = `${engine.baseUrl.replace(/^http/, 'ws')}${base}/kernels/${started.body.id}/channels`;
    const socket = await channels(ws, { authorization: `token ${KEY}` });
    socket.send(
      JSON.stringify({
        header: { msg_id: 't1', msg_type: 'execute_request', username: 'u', session: 's', version: '5.3' },
        parent_header: {},
        metadata: {},
        content: { code: 'import time\nn = 1\ntime.sleep(5)', silent: false },
        channel: 'shell',
      }),
    );
    expect(await socket.until((m) => m.msg_type === 'execute_reply')).toBe(true);
    const reply = socket.received.find((m) => m.msg_type === 'execute_reply');
    expect(reply.content).toMatchObject({ status: 'error', ename: 'SwitchyardTimeout' });
    const action = (await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions.at(-1);
    expect(action).toMatchObject({ type: 'code', status: 'timed_out' });
    // A timeout interrupts the cell and keeps the kernel's state, as for a REST cell.
    const after = await engine.action(sid, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'n + 1',
    });
    expect(after.output.result).toBe('2');
  });

  it('nbclient runs a notebook through GatewayKernelManager: the DataFrame’s HTML, the chart’s PNG, the error cell’s error', async () => {
    const sid = await engine.createSession({ template: 'data-science' });
    const ran = await jupyterScript(
      home,
      'run_notebook.py',
      [
        '--url',
        `${engine.baseUrl}/v1/sessions/${sid}/jupyter`,
        '--token',
        KEY,
        '--notebook',
        path.join(JUPYTER_SCRIPTS, 'data-science.ipynb'),
        '--out',
        path.join(home, 'executed.ipynb'),
      ],
      240_000,
    );
    expect(ran.valid).toBe(true);
    const cell = (id: string): any => ran.cells.find((c: any) => c.id === id);

    const table = cell('table');
    expect(table.execution_count).toBe(1);
    expect(table.outputs[0]).toEqual({ output_type: 'stream', name: 'stdout', text: 'rows: 10\n' });
    const described = table.outputs.find((o: any) => o.output_type === 'execute_result');
    expect(described).toMatchObject({
      execution_count: 1,
      mimes: expect.arrayContaining(['text/html', 'text/plain']),
    });
    expect(described.html).toContain('<table');
    expect(described.text).toContain('mean');

    const chart = cell('chart');
    const png = chart.outputs.find((o: any) => o.mimes?.includes('image/png'));
    expect(png).toMatchObject({ output_type: 'display_data', png: { signature: '89504e470d0a1a0a' } });
    expect(png.png.bytes).toBeGreaterThan(1000);

    // The traceback the kernel printed on stderr is the error's, shown once (as Jupyter shows it).
    const failed = cell('error');
    expect(failed.outputs.map((o: any) => `${o.output_type}:${o.name ?? ''}`)).toEqual([
      'stream:stdout',
      'error:',
    ]);
    expect(failed.outputs[0].text).toBe('before the error\n');
    const error = failed.outputs[1];
    expect(error).toMatchObject({ ename: 'ZeroDivisionError', evalue: 'division by zero' });
    expect(error.traceback[0]).toBe('Traceback (most recent call last):');
    expect(error.traceback.at(-1)).toBe('ZeroDivisionError: division by zero');
    expect(cell('after-error').outputs).toEqual([
      { output_type: 'stream', name: 'stdout', text: 'sum of y: 285\n' },
    ]);

    // Each cell was a code action of the session kernel, recorded; nbclient deleted its kernel when done.
    const actions = (await engine.request('GET', `/v1/sessions/${sid}/actions`)).body.actions;
    expect(actions.map((a: any) => [a.type, a.status])).toEqual([
      ['code', 'succeeded'],
      ['code', 'succeeded'],
      ['code', 'failed'],
      ['code', 'succeeded'],
    ]);
    expect((await engine.request('GET', `/v1/sessions/${sid}/jupyter/api/kernels`)).body).toEqual([]);
    expect((await engine.request('GET', `/v1/sessions/${sid}/kernels`)).body.kernels).toEqual([]);
  }, 300_000);

  it('runs a cell through jupyter server’s own REST and WebSocket (JupyterLab’s path), sharing state with REST cells', async () => {
    const first = await serverRun({
      kernel: { name: 'python3' },
      steps: [
        {
          execute:
            'shared_from_jupyter = 6 * 7\nprint("jupyter says", shared_from_jupyter)\nshared_from_jupyter',
        },
      ],
    });
    const [cell] = first.steps;
    expect(cell.reply).toMatchObject({
      channel: 'shell',
      msg_type: 'execute_reply',
      content: { status: 'ok', execution_count: expect.any(Number) },
      metadata: { switchyard: { actionId: expect.stringMatching(/^act_/), status: 'succeeded' } },
    });
    expect(typesOf(cell)).toEqual([
      'status:busy',
      'execute_input',
      'stream',
      'execute_result',
      'status:idle',
    ]);
    expect(streamOf(cell)).toBe('jupyter says 42\n');
    expect(cell.iopub[3][1]).toMatchObject({
      data: { 'text/plain': '42' },
      execution_count: cell.reply.content.execution_count,
    });
    // The kernel is the gateway's: a handle of this session.
    const listed = (await engine.request('GET', `/v1/sessions/${serverSid}/jupyter/api/kernels`)).body;
    expect(listed.map((k: any) => k.id)).toContain(first.kernel_id);

    const rest = async (code: string) =>
      engine.action(serverSid, { type: 'code', language: 'python', state: 'session', code });
    const read = await rest('shared_from_jupyter + 1');
    expect(read).toMatchObject({ status: 'succeeded', output: { result: '43' } });
    expect(read.output.kernel.executionCount).toBe(cell.reply.content.execution_count + 1);
    await rest('shared_from_rest = "set over REST"');
    const back = await serverRun({
      kernel: { id: first.kernel_id },
      steps: [
        { execute: 'shared_from_rest' },
        { request: 'kernel_info_request' },
        { request: 'kernel_info_request', channel: 'control' },
        { request: 'complete_request', content: { code: 'import math\nma', cursor_pos: 14 } },
        { request: 'inspect_request', content: { code: 'len', cursor_pos: 3, detail_level: 0 } },
        { request: 'is_complete_request', content: { code: 'for i in range(3):' } },
        { request: 'comm_info_request', content: {} },
      ],
    });
    const [shared, info, controlInfo, completion, inspection, completeness, comms] = back.steps;
    expect(shared.iopub.find(([type]) => type === 'execute_result')?.[1].data['text/plain']).toBe(
      "'set over REST'",
    );
    expect(info.reply).toMatchObject({
      channel: 'shell',
      msg_type: 'kernel_info_reply',
      content: {
        status: 'ok',
        protocol_version: '5.3',
        language_info: { name: 'python', file_extension: '.py' },
      },
    });
    expect(typesOf(info)).toEqual(['status:busy', 'status:idle']);
    expect(controlInfo.reply).toMatchObject({ channel: 'control', msg_type: 'kernel_info_reply' });
    expect(completion.reply.content).toEqual({
      status: 'ok',
      matches: ['map', 'math', 'max'],
      cursor_start: 12,
      cursor_end: 14,
      metadata: {},
    });
    expect(inspection.reply.content).toEqual({ status: 'ok', found: false, data: {}, metadata: {} });
    expect(completeness.reply.content).toEqual({ status: 'incomplete', indent: '    ' });
    expect(comms.reply).toMatchObject({ msg_type: 'comm_info_reply', content: { status: 'ok', comms: {} } });
    // The recorded action is the one the reply names.
    const actionId = cell.reply.metadata.switchyard.actionId;
    const recorded = await engine.request('GET', `/v1/sessions/${serverSid}/actions/${actionId}`);
    expect(recorded.body).toMatchObject({ type: 'code', status: 'succeeded', input: { state: 'session' } });
  }, 120_000);

  it('interrupts (state kept), restarts (state gone, for REST too) and deletes through jupyter server', async () => {
    const run = await serverRun({
      kernel: { name: 'python3' },
      steps: [
        {
          execute: 'kept = "yes"\nimport time\nprint("sleeping", flush=True)\ntime.sleep(60)',
          interrupt_after: 3,
        },
        { execute: 'kept' },
        { restart: true },
        { execute: 'kept' },
      ],
    });
    const [slept, kept, restarted, gone] = run.steps;
    expect(slept.reply.content).toMatchObject({ status: 'error', ename: 'KeyboardInterrupt' });
    // Output streams while the cell runs: it came well before the interrupt ended the cell.
    const sleeping = slept.iopub.find(([type]) => type === 'stream')!;
    expect(sleeping[1]).toEqual({ name: 'stdout', text: 'sleeping\n' });
    expect(sleeping[2]).toBeLessThan(slept.reply.at - 1);
    expect(slept.reply.at).toBeGreaterThan(3);
    expect(typesOf(slept)).toContain('error');
    expect(kept.iopub.find(([type]) => type === 'execute_result')?.[1].data['text/plain']).toBe("'yes'");
    expect(restarted).toMatchObject({ status: 200, body: { id: run.kernel_id, name: 'python3' } });
    expect(gone.reply.content).toMatchObject({
      status: 'error',
      ename: 'NameError',
      evalue: "name 'kept' is not defined",
    });
    const rest = await engine.action(serverSid, {
      type: 'code',
      language: 'python',
      state: 'session',
      code: 'kept',
    });
    expect(rest.status).toBe('failed');
    expect(rest.stderr).toContain("NameError: name 'kept' is not defined");

    const deleted = await serverRun({ kernel: { id: run.kernel_id }, steps: [{ delete: true }] });
    expect(deleted.steps[0].status).toBe(204);
    const kernels = (await engine.request('GET', `/v1/sessions/${serverSid}/jupyter/api/kernels`)).body;
    expect(kernels.map((k: any) => k.id)).not.toContain(run.kernel_id);
    const live = (await engine.request('GET', `/v1/sessions/${serverSid}/kernels`)).body.kernels;
    expect(live.filter((k: any) => k.language === 'python')).toEqual([]);
  }, 120_000);

  it('answers a cell the session’s policy refuses with a Jupyter error naming the reason', async () => {
    const run = await serverRun({ kernel: { name: 'bash' }, steps: [{ execute: 'echo should not run' }] });
    const [cell] = run.steps;
    expect(cell.reply.content).toMatchObject({ status: 'error', ename: 'SwitchyardDenied' });
    expect(cell.reply.content.evalue).toContain('no shell in this notebook session');
    expect(cell.iopub.find(([type]) => type === 'error')?.[1]).toMatchObject({ ename: 'SwitchyardDenied' });
    expect(streamOf(cell)).toBe('');
    const actions = (await engine.request('GET', `/v1/sessions/${serverSid}/actions`)).body.actions;
    expect(actions.at(-1)).toMatchObject({ type: 'code', status: 'denied' });
  }, 60_000);

  it('keeps a cell awaiting approval busy until it is decided, then answers it', async () => {
    const running = serverRun({
      kernel: { name: 'javascript' },
      steps: [{ execute: 'console.log("approved and ran")' }],
    });
    let pending: any;
    expect(
      await eventually(async () => {
        const approvals = (await engine.request('GET', '/v1/approvals')).body.approvals;
        pending = approvals.find((a: any) => a.sessionId === serverSid);
        return pending !== undefined;
      }, 30_000),
    ).toBe(true);
    const kernels = (await engine.request('GET', `/v1/sessions/${serverSid}/jupyter/api/kernels`)).body;
    expect(kernels.find((k: any) => k.name === 'javascript')).toMatchObject({ execution_state: 'busy' });
    const decided = await engine.request(
      'POST',
      `/v1/sessions/${serverSid}/actions/${pending.actionId}/approve`,
      { reason: 'fine' },
    );
    expect(decided.status).toBe(200);
    const [cell] = (await running).steps;
    expect(cell.reply.content).toMatchObject({ status: 'ok' });
    expect(streamOf(cell)).toBe('approved and ran\n');
    expect(typesOf(cell)).toEqual(['status:busy', 'execute_input', 'stream', 'status:idle']);
  }, 90_000);
});
