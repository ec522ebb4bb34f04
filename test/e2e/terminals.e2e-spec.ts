import { createHash, createHmac } from 'node:crypto';
import { SwitchyardClient } from '../../packages/client/src';
import { EngineHarness } from '../support/engine-harness';
import { TerminalClient, UpgradeRefused } from '../support/terminal-client';

jest.setTimeout(120_000);

/**
 * Terminals (issue 32): a PTY running a login bash in the session's sandbox (its pooled container here), driven over
 * its WebSocket by a real terminal client (xterm.js, headless) whose screen the tests read: echo, a resize seen by
 * `stty`, a full-screen program (`top`), Ctrl-C, a reconnect that shows the scrollback, the session's environment
 * (its home, what an earlier action installed, a server a process started), the end of the shell closing the socket,
 * tokens, tenants, policies and the records of it all.
 */
describe('terminals', () => {
  const KEY = 'terminals-test-key-a';
  const OTHER_KEY = 'terminals-test-key-b';
  const MAX_TERMINALS = 3;
  const IDLE_SECONDS = 6;
  let engine: EngineHarness;
  const wsUrl = (path: string): string => `${engine.baseUrl.replace(/^http/, 'ws')}${path}`;
  const bearer = { authorization: `Bearer ${KEY}` };

  beforeAll(async () => {
    engine = (
      await EngineHarness.start({
        SWITCHYARD_API_KEYS: `${KEY},${OTHER_KEY}`,
        SWITCHYARD_MAX_TERMINALS_PER_SESSION: String(MAX_TERMINALS),
        // Short, so that the idle close is seen here; every other test keeps a client attached or output flowing.
        SWITCHYARD_TERMINAL_IDLE_SECONDS: String(IDLE_SECONDS),
      })
    ).as(KEY);
  });
  afterAll(() => engine?.stop());

  async function open(sid: string, body: Record<string, unknown> = {}): Promise<any> {
    const res = await engine.request('POST', `/v1/sessions/${sid}/terminals`, body);
    if (res.status !== 201) throw new Error(`open: ${res.status} ${JSON.stringify(res.body)}`);
    return res.body;
  }

  /** Opens a terminal and attaches to it; resolves once bash answers. */
  async function shell(
    sid: string,
    body: Record<string, unknown> = {},
  ): Promise<{ id: string; client: TerminalClient }> {
    const opened = await open(sid, body);
    const client = await TerminalClient.connect(wsUrl(opened.wsPath), {
      headers: bearer,
      cols: (body.cols as number) ?? 80,
      rows: (body.rows as number) ?? 24,
    });
    client.type('echo ready-$((40+2))\r');
    await client.untilLine(/^ready-42$/);
    return { id: opened.id, client };
  }

  /** The session's terminal actions, oldest first. */
  async function terminalActions(sid: string): Promise<any[]> {
    const res = await engine.request('GET', `/v1/sessions/${sid}/actions?limit=1000`);
    return (res.body.actions as any[]).filter((a) => a.type === 'terminal');
  }

  /** Polls `probe` until it answers something (bounded): for what the engine records just after answering. */
  async function eventually<T>(probe: () => Promise<T | undefined>, what: string): Promise<T> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const value = await probe();
      if (value !== undefined) return value;
      if (Date.now() > deadline) throw new Error(`never: ${what}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it('opens a shell in the session’s pooled container, echoes, follows resizes, draws top and takes Ctrl-C', async () => {
    const sid = await engine.createSession();
    const opened = await open(sid, { cols: 90, rows: 30 });
    expect(opened).toMatchObject({
      id: expect.stringMatching(/^trm_[0-9a-f]{16}$/),
      status: 'open',
      tier: 'pooled',
      cols: 90,
      rows: 30,
      token: expect.any(String),
      tokenExpiresAt: expect.any(String),
      wsPath: `/v1/sessions/${sid}/terminals/${opened.id}/ws`,
      actionId: expect.stringMatching(/^act_/),
    });
    const client = await TerminalClient.connect(wsUrl(opened.wsPath), {
      headers: bearer,
      cols: 90,
      rows: 30,
    });

    client.type('echo hello-$((6*7))\r');
    await client.untilLine(/^hello-42$/);
    client.type('stty size\r');
    await client.untilLine(/^30 90$/);

    // A resize message on the socket, then one over REST: the PTY's size follows both.
    client.resize(100, 32);
    client.type('stty size\r');
    await client.untilLine(/^32 100$/);
    const resized = await engine.request('POST', `/v1/sessions/${sid}/terminals/${opened.id}/resize`, {
      cols: 120,
      rows: 40,
    });
    expect(resized).toMatchObject({ status: 200, body: { cols: 120, rows: 40 } });
    client.term.resize(120, 40);
    client.type('stty size\r');
    await client.untilLine(/^40 120$/);

    // A full-screen program: top draws its whole screen from the top-left corner over what was there, and leaves it
    // to the shell on `q`.
    client.type('top -d 1\r');
    await client.until(
      () => /^top - /.test(client.screen()) && /^\s*PID USER/m.test(client.screen()),
      "top's screen",
    );
    expect(client.screen()).toMatch(/^Tasks: +\d+ total/m);
    expect(client.screen()).toMatch(/ top\s*$/m);
    client.type('q');
    await client.until(() => /\$\s*$/.test(client.cursorLine()), 'the prompt back after top');
    client.type('echo back-$((3+3))\r');
    await client.untilLine(/^back-6$/);

    // Ctrl-C interrupts what runs in the foreground: the shell gets its prompt back, and $? says SIGINT.
    client.type('echo started-$((2+3)); sleep 100\r');
    await client.untilLine(/^started-5$/);
    client.type('\x03');
    client.type('echo status=$?\r');
    await client.untilLine(/^status=130$/);

    const info = await engine.request('GET', `/v1/sessions/${sid}/terminals/${opened.id}`);
    expect(info.body).toMatchObject({ status: 'open', clients: 1, cols: 120, rows: 40 });
    expect(info.body.bytesIn).toBeGreaterThan(50);
    expect(info.body.bytesOut).toBeGreaterThan(info.body.bytesIn);
    await client.close();
  });

  it('keeps the terminal across clients: several attach and type, a reconnect shows the scrollback', async () => {
    const sid = await engine.createSession();
    const { id, client: first } = await shell(sid);
    first.type('echo before-$((1+1))\r');
    await first.untilLine(/^before-2$/);

    // A browser's way in: a token of this terminal in the query, no key.
    const token = await engine.request('POST', `/v1/sessions/${sid}/terminals/${id}/token`, {
      ttlSeconds: 60,
    });
    expect(token).toMatchObject({
      status: 200,
      body: { token: expect.any(String), wsPath: expect.any(String) },
    });
    const second = await TerminalClient.connect(wsUrl(`${token.body.wsPath}?token=${token.body.token}`));
    // What happened before it attached is on its screen.
    await second.untilLine(/^before-2$/);
    second.type('echo from-second-$((3*3))\r');
    await first.untilLine(/^from-second-9$/);
    await second.untilLine(/^from-second-9$/);
    expect((await engine.request('GET', `/v1/sessions/${sid}/terminals/${id}`)).body.clients).toBe(2);

    await first.close();
    await second.close();
    // Nobody attached: the terminal lives on. A reconnect sees it all.
    const again = await TerminalClient.connect(wsUrl(`/v1/sessions/${sid}/terminals/${id}/ws`), {
      headers: bearer,
    });
    await again.untilLine(/^from-second-9$/);
    expect(again.text()).toMatch(/^before-2$/m);
    again.type('echo after-$((2+2))\r');
    await again.untilLine(/^after-4$/);
    await again.close();
  });

  it('runs with the session: its home, what an earlier action installed, a server a process started', async () => {
    const sid = await engine.createSession();
    // An earlier action installs a package for the session's user (its home, kept with the workspace).
    const installed = await engine.action(sid, {
      type: 'code',
      language: 'python',
      code:
        'import os, site\n' +
        'd = os.path.join(site.getusersitepackages(), "terminal_pkg")\n' +
        'os.makedirs(d, exist_ok=True)\n' +
        'open(os.path.join(d, "__init__.py"), "w").write("VALUE = 6 * 7\\n")\n' +
        // A command installed for the user (as `pip install --user` puts one in ~/.local/bin).
        'b = os.path.expanduser("~/.local/bin")\n' +
        'os.makedirs(b, exist_ok=True)\n' +
        'open(os.path.join(b, "hello-cmd"), "w").write("#!/bin/sh\\necho hello from the cmd\\n")\n' +
        'os.chmod(os.path.join(b, "hello-cmd"), 0o755)\n' +
        'print("installed", os.environ["PATH"])\n',
    });
    expect(installed).toMatchObject({
      status: 'succeeded',
      stdout: expect.stringMatching(/^installed \S+\n$/),
    });
    const actionPath = (installed.stdout as string).trim().split(' ')[1];
    const port = 21_000 + Math.floor(Math.random() * 20_000);
    const server = await engine.action(sid, {
      type: 'process',
      op: 'start',
      command: `python3 -u -m http.server ${port} --bind 127.0.0.1`,
      name: 'web',
    });
    expect(server).toMatchObject({ status: 'succeeded', tier: 'pooled' });

    const { client } = await shell(sid);
    client.type('echo home=$HOME term=$TERM\r');
    await client.untilLine(/^home=\/workspace\/\.home term=xterm-256color$/);
    client.type(`python3 -c 'import terminal_pkg; print("pkg", terminal_pkg.VALUE)'\r`);
    await client.untilLine(/^pkg 42$/);
    // The shell reads a login shell's files, yet its PATH is the session's: what the action installed is found.
    client.type('echo "path=$PATH"; hello-cmd\r');
    await client.untilLine(/^hello from the cmd$/);
    // (The line is longer than the screen is wide: joined again where it wrapped.)
    expect(client.text().replace(/\n/g, '')).toContain(`path=${actionPath}hello from the cmd`);
    client.type(
      `curl -sS -o /dev/null -w 'http=%{http_code}\\n' --retry 30 --retry-connrefused --retry-delay 0 ` +
        `--max-time 20 http://127.0.0.1:${port}/\r`,
    );
    await client.untilLine(/^http=200$/);
    await client.close();
  });

  it('closes a terminal left with no client and no output once the idle time has passed, and records why', async () => {
    const sid = await engine.createSession();
    const { id, client } = await shell(sid);
    await client.close();
    const left = Date.now();
    // Still open while idle for less than the setting (the clock starts when the last client leaves).
    await new Promise((resolve) => setTimeout(resolve, 2000));
    expect((await engine.request('GET', `/v1/sessions/${sid}/terminals/${id}`)).body).toMatchObject({
      status: 'open',
      clients: 0,
    });
    const info = await eventually(async () => {
      const res = await engine.request('GET', `/v1/sessions/${sid}/terminals/${id}`);
      return res.body.status === 'closed' ? res.body : undefined;
    }, 'the idle terminal closed');
    expect(info).toMatchObject({ status: 'closed', endReason: 'idle' });
    // Closed after the idle time, and at most a quarter of it (the sweep's period) plus polling late.
    expect(Date.now() - left).toBeGreaterThanOrEqual(IDLE_SECONDS * 1000);
    expect(Date.now() - left).toBeLessThan(IDLE_SECONDS * 1000 * 1.25 + 2000);
    const close = await eventually(async () => {
      const list = await terminalActions(sid);
      return list.find((a) => a.inputSummary.startsWith('close '));
    }, 'the idle close recorded');
    const detail = await engine.request('GET', `/v1/sessions/${sid}/actions/${close.id}`);
    expect(detail.body.input).toMatchObject({ op: 'close', terminalId: id, reason: 'idle' });
  });

  it('closes the socket with code 1000 and the exit status when the shell exits, and records the end', async () => {
    const sid = await engine.createSession();
    const { id, client } = await shell(sid);
    client.type('exit 7\r');
    expect(await client.closed).toEqual({ code: 1000, reason: 'exit code 7' });
    const info = await engine.request('GET', `/v1/sessions/${sid}/terminals/${id}`);
    expect(info.body).toMatchObject({ status: 'closed', exitCode: 7, endReason: 'exited', clients: 0 });

    // Ended: no client, no resize, no token, no close (409); the record stays.
    await expect(
      TerminalClient.connect(wsUrl(`/v1/sessions/${sid}/terminals/${id}/ws`), { headers: bearer }),
    ).rejects.toMatchObject({ status: 409 });
    for (const [method, path, body] of [
      ['POST', `/terminals/${id}/resize`, { cols: 10, rows: 10 }],
      ['POST', `/terminals/${id}/token`, {}],
      ['DELETE', `/terminals/${id}`, undefined],
    ] as const) {
      const res = await engine.request(method, `/v1/sessions/${sid}${path}`, body);
      expect({ path, status: res.status, code: res.body.error?.code }).toEqual({
        path,
        status: 409,
        code: 'TERMINAL_CLOSED',
      });
    }

    // The open and the end are `terminal` actions of the session, with what went through it.
    const actions = await eventually(async () => {
      const list = await terminalActions(sid);
      return list.some((a) => a.inputSummary.startsWith('close ')) ? list : undefined;
    }, 'the end of the terminal recorded');
    expect(actions.map((a) => [a.inputSummary.split(' ')[0], a.status])).toEqual([
      ['open', 'succeeded'],
      ['close', 'succeeded'],
    ]);
    const close = await engine.request('GET', `/v1/sessions/${sid}/actions/${actions[1].id}`);
    expect(close.body).toMatchObject({
      input: { type: 'terminal', op: 'close', terminalId: id, reason: 'exited' },
      output: { terminalId: id, terminal: { status: 'closed', exitCode: 7 }, durationMs: expect.any(Number) },
    });
    expect(close.body.output.terminal.bytesIn).toBeGreaterThan(0);
  });

  it('closes on DELETE: the clients see code 1000, the close is recorded with the bytes', async () => {
    const sid = await engine.createSession();
    const { id, client } = await shell(sid);
    const closed = await engine.request('DELETE', `/v1/sessions/${sid}/terminals/${id}`);
    expect(closed).toMatchObject({
      status: 200,
      body: { id, status: 'closed', endReason: 'closed', actionId: expect.stringMatching(/^act_/) },
    });
    const end = await client.closed;
    expect(end.code).toBe(1000);
    expect(end.reason).toMatch(/^closed, /);
    const action = await engine.request('GET', `/v1/sessions/${sid}/actions/${closed.body.actionId}`);
    expect(action.body).toMatchObject({ type: 'terminal', input: { op: 'close' }, status: 'succeeded' });
    expect(action.body.output.terminal.bytesOut).toBeGreaterThan(0);
    const list = await engine.request('GET', `/v1/sessions/${sid}/terminals`);
    expect(list.body.terminals).toEqual([expect.objectContaining({ id, status: 'closed' })]);
  });

  it('authenticates the WebSocket: the key, or a token of this terminal that is neither forged nor expired', async () => {
    const sid = await engine.createSession();
    const opened = await open(sid);
    const path = opened.wsPath as string;
    const refused = async (url: string, headers: Record<string, string> = {}): Promise<number> => {
      try {
        const client = await TerminalClient.connect(url, { headers });
        await client.close();
        return 101;
      } catch (err) {
        if (err instanceof UpgradeRefused) return err.status;
        throw err;
      }
    };
    expect(await refused(wsUrl(path))).toBe(401);
    expect(await refused(wsUrl(path), { authorization: 'Bearer not-a-key' })).toBe(401);
    // The token the open answered works; one with another signature does not.
    expect(await refused(wsUrl(`${path}?token=${opened.token}`))).toBe(101);
    const forged = `${opened.token.slice(0, -2)}${opened.token.endsWith('AA') ? 'BB' : 'AA'}`;
    expect(await refused(wsUrl(`${path}?token=${forged}`))).toBe(401);
    // Signed with the engine's key as the engine signs (so this test signs right), but expired a minute ago.
    expect(await refused(wsUrl(`${path}?token=${signedToken(sid, `terminal:${opened.id}`, 60)}`))).toBe(101);
    expect(await refused(wsUrl(`${path}?token=${signedToken(sid, `terminal:${opened.id}`, -60)}`))).toBe(401);
    // A valid token of another terminal opens nothing here.
    const other = await open(sid);
    expect(await refused(wsUrl(`${path}?token=${other.token}`))).toBe(401);
    // A page of another site gets no terminal with the key alone (its cookies are not a key, but be strict).
    expect(await refused(wsUrl(path), { ...bearer, origin: 'https://evil.example' })).toBe(403);

    // Another tenant: the session does not exist for it, over REST and WebSocket alike.
    expect(await refused(wsUrl(path), { authorization: `Bearer ${OTHER_KEY}` })).toBe(404);
    const theirs = await fetch(`${engine.baseUrl}/v1/sessions/${sid}/terminals/${opened.id}`, {
      headers: { authorization: `Bearer ${OTHER_KEY}` },
    });
    expect(theirs.status).toBe(404);
    expect(await refused(wsUrl(`/v1/sessions/${sid}/terminals/trm_0000000000000000/ws`), bearer)).toBe(404);
    expect(await refused(wsUrl('/v1/sessions/nope/ws'), bearer)).toBe(404);
  });

  it('validates what it is asked, and holds a session to its limit of terminals', async () => {
    const sid = await engine.createSession();
    const bad = await engine.request('POST', `/v1/sessions/${sid}/terminals`, { cols: 0, rows: 'x' });
    expect(bad.status).toBe(400);
    expect(bad.body.error.fields.map((f: { path: string }) => f.path).sort()).toEqual(['cols', 'rows']);
    const env = await engine.request('POST', `/v1/sessions/${sid}/terminals`, {
      env: { LD_PRELOAD: '/x.so' },
    });
    expect(env).toMatchObject({ status: 400, body: { error: { fields: [{ path: 'env.LD_PRELOAD' }] } } });
    const nul = await engine.request('POST', `/v1/sessions/${sid}/terminals`, { command: 'echo a\u0000b' });
    expect(nul).toMatchObject({ status: 400, body: { error: { fields: [{ path: 'command' }] } } });
    const cwd = await engine.request('POST', `/v1/sessions/${sid}/terminals`, { cwd: '../..' });
    expect(cwd).toMatchObject({ status: 400, body: { error: { fields: [{ path: 'cwd' }] } } });
    const missing = await engine.request('POST', `/v1/sessions/${sid}/terminals`, { cwd: 'no/such/dir' });
    expect(missing).toMatchObject({ status: 400, body: { error: { fields: [{ path: 'cwd' }] } } });
    const resize = await engine.request('POST', `/v1/sessions/${sid}/terminals/trm_0000000000000000/resize`, {
      cols: 10,
      rows: 10,
    });
    expect(resize.status).toBe(404);
    // The action API does not open terminals: they live with their WebSocket.
    const asAction = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'terminal',
      op: 'open',
    });
    expect(asAction).toMatchObject({ status: 400, body: { error: { fields: [{ path: 'type' }] } } });

    // `null` is absent, as for every optional field.
    const nulls = await open(sid, { cols: null, rows: null, cwd: null, command: null, env: null });
    expect(nulls).toMatchObject({ status: 'open', cols: 80, rows: 24, cwd: '' });
    expect(nulls).not.toHaveProperty('command');
    for (let i = 1; i < MAX_TERMINALS; i++) await open(sid);
    const over = await engine.request('POST', `/v1/sessions/${sid}/terminals`, {});
    expect(over).toMatchObject({ status: 429, body: { error: { code: 'TERMINAL_LIMIT' } } });
    expect(over.body.error.message).toMatch(/SWITCHYARD_MAX_TERMINALS_PER_SESSION/);
    expect(over.headers.get('retry-after')).toBe('1');
  });

  it('obeys the session’s policy: a bash deny refuses it (recorded denied), an ask waits for a person once', async () => {
    const denied = await engine.createSession({
      policy: { rules: [{ effect: 'deny', match: { language: 'bash' }, reason: 'no shells here' }] },
    });
    const refused = await engine.request('POST', `/v1/sessions/${denied}/terminals`, {});
    expect(refused).toMatchObject({ status: 403, body: { error: { code: 'POLICY_DENIED' } } });
    const record = await engine.request(
      'GET',
      `/v1/sessions/${denied}/actions/${refused.body.error.details.actionId}`,
    );
    expect(record.body).toMatchObject({ type: 'terminal', input: { op: 'open' }, status: 'denied' });
    expect((await engine.request('GET', `/v1/sessions/${denied}/terminals`)).body.terminals).toEqual([]);

    const asked = await engine.createSession({
      policy: { rules: [{ effect: 'ask', match: { tool: 'terminal' }, reason: 'a person watches shells' }] },
    });
    const waiting = await engine.request('POST', `/v1/sessions/${asked}/terminals`, {});
    expect(waiting).toMatchObject({
      status: 202,
      body: { status: 'awaiting_approval', id: expect.stringMatching(/^trm_/), actionId: expect.any(String) },
    });
    const { id, actionId, wsPath } = waiting.body;
    expect((await engine.request('GET', `/v1/sessions/${asked}/terminals/${id}`)).status).toBe(404);
    const approved = await engine.request('POST', `/v1/sessions/${asked}/actions/${actionId}/approve`, {
      reason: 'go ahead',
    });
    expect(approved.status).toBe(200);
    const info = await eventually(async () => {
      const res = await engine.request('GET', `/v1/sessions/${asked}/terminals/${id}`);
      return res.status === 200 ? res.body : undefined;
    }, 'the approved terminal open');
    expect(info).toMatchObject({ status: 'open', tier: 'pooled' });
    // Once open, nothing more is asked: typing is not an action.
    const client = await TerminalClient.connect(wsUrl(wsPath), { headers: bearer });
    client.type('echo approved-$((5*5))\r');
    await client.untilLine(/^approved-25$/);
    await client.close();
    const record2 = await engine.request('GET', `/v1/sessions/${asked}/actions/${actionId}`);
    expect(record2.body).toMatchObject({ type: 'terminal', status: 'succeeded' });
  });

  it('is driven by the TypeScript client: open, a WebSocket URL with a token, resize, close', async () => {
    const client = new SwitchyardClient({ baseUrl: engine.baseUrl, apiKey: KEY });
    const { id: sid } = await client.sessions.create();
    const opened = await client.terminals.open(sid, { cols: 70, rows: 20 });
    if (opened.status !== 'open' || !('token' in opened))
      throw new Error(`not opened: ${JSON.stringify(opened)}`);
    const url = client.terminals.wsUrl(opened, opened.token);
    expect(url).toBe(`${wsUrl(opened.wsPath)}?token=${encodeURIComponent(opened.token)}`);
    const screen = await TerminalClient.connect(url, { cols: 70, rows: 20 });
    expect(await client.terminals.resize(sid, opened.id, 75, 21)).toMatchObject({ cols: 75, rows: 21 });
    screen.type('stty size\r');
    await screen.untilLine(/^21 75$/);
    expect((await client.terminals.list(sid)).map((t) => t.id)).toEqual([opened.id]);
    const token = await client.terminals.token(sid, opened.id, 30);
    expect(token.wsPath).toBe(opened.wsPath);
    const closed = await client.terminals.close(sid, opened.id);
    expect(closed).toMatchObject({ id: opened.id, status: 'closed', actionId: expect.any(String) });
    expect((await screen.closed).code).toBe(1000);
    await expect(client.terminals.get(sid, 'trm_0000000000000000')).rejects.toMatchObject({ status: 404 });
  });

  /** A token as the engine signs them (its key derived from the API keys), valid from now for `seconds`. */
  function signedToken(sessionId: string, scope: string, seconds: number): string {
    const tenant = `t_${createHash('sha256').update(KEY).digest('hex').slice(0, 16)}`;
    const key = createHash('sha256')
      .update('switchyard access tokens\0')
      .update([KEY, OTHER_KEY].sort().join('\0'))
      .digest();
    const exp = Math.floor(Date.now() / 1000) + seconds;
    const payload = Buffer.from(JSON.stringify({ t: tenant, s: sessionId, k: scope, e: exp })).toString(
      'base64url',
    );
    return `${payload}.${createHmac('sha256', key).update(payload).digest('base64url')}`;
  }
});
