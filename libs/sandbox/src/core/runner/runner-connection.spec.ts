import { runnerWire } from '../../../test/runner-wire';
import { RUNNER_EXIT_OK } from '../../../test/runner-exit';
import { RUNNER_PROTOCOL } from './runner-protocol';
import {
  RunnerGoneError,
  RunnerProtocolError,
  RunnerRefusedError,
  RunnerTimeoutError,
} from './runner.errors';

const wire = () => runnerWire();

const EXIT = RUNNER_EXIT_OK;

const RUN = {
  language: 'python' as const,
  code: 'print(1)',
  env: { PATH: '/usr/bin' },
  timeoutMs: 1000,
  cpuSeconds: 2,
  capBytes: 100,
  capLines: 10,
  workspace: ['2049', '18446744073709551557'] as [string, string],
};

describe('RunnerConnection', () => {
  it('resolves hello, and refuses another protocol version', async () => {
    const ok = wire();
    ok.reply({ ev: 'hello', protocol: RUNNER_PROTOCOL, pid: 7, python: '3.11.2', oomCounter: true });
    await expect(ok.connection.hello).resolves.toMatchObject({ pid: 7, oomCounter: true });

    const old = wire();
    old.reply({ ev: 'hello', protocol: 99, pid: 7 });
    await expect(old.connection.hello).rejects.toBeInstanceOf(RunnerProtocolError);
    expect(old.connection.isClosed).toBe(true);
  });

  it('pings, and times out or fails when the runner does not answer well', async () => {
    const w = wire();
    const pong = w.connection.ping(1000);
    await w.settle();
    expect(w.sent).toEqual([{ op: 'ping', id: 1 }]);
    w.reply({ ev: 'pong', id: 1, ok: true, busy: false, ms: 1.5 });
    await expect(pong).resolves.toMatchObject({ ok: true, ms: 1.5 });

    await expect(w.connection.ping(20)).rejects.toBeInstanceOf(RunnerTimeoutError);
    w.reply({ ev: 'pong', id: 2, ok: true }); // late answer: ignored
    const bad = w.connection.ping(1000);
    w.reply({ ev: 'pong', id: 3, ok: false, error: 'fork: EAGAIN' });
    await expect(bad).rejects.toThrow('fork: EAGAIN');
  });

  it('streams output of a run and resolves its exit, with lines split across chunks', async () => {
    const w = wire();
    const chunks: Array<[number, string]> = [];
    const { id, exit } = w.connection.run(RUN, (fd, data) => chunks.push([fd, data.toString('utf8')]));
    await w.settle();
    expect(w.sent[0]).toMatchObject({
      op: 'run',
      id,
      language: 'python',
      code: 'print(1)',
      capBytes: 100,
      // Exact, also past 2^53: device and inode travel as decimal strings.
      workspace: ['2049', '18446744073709551557'],
    });
    const out = JSON.stringify({ ev: 'out', id, fd: 1, data: Buffer.from('1\n').toString('base64') });
    w.fromRunner.write(out.slice(0, 10));
    w.fromRunner.write(`${out.slice(10)}\n${JSON.stringify({ ev: 'out', id, fd: 2, data: 'ZXJy' })}\n`);
    w.reply({ ...EXIT, ev: 'exit', id });
    await expect(exit).resolves.toMatchObject({ exitCode: 0, durationMs: 12 });
    expect(chunks).toEqual([
      [1, '1\n'],
      [2, 'err'],
    ]);
  });

  it('sends kill requests and reports a refused request', async () => {
    const w = wire();
    const { id, exit } = w.connection.run(RUN, () => undefined);
    w.connection.kill(id);
    await w.settle();
    expect(w.sent.map((m) => m.op)).toEqual(['run', 'kill']);
    w.reply({ ev: 'error', id, code: 'busy', message: 'busy: one run at a time' });
    await expect(exit).rejects.toThrow('busy');

    const refused = w.connection.run(RUN, () => undefined);
    w.reply({ ev: 'error', id: refused.id, code: 'workspace', message: 'not it', workspace: [2049, 5] });
    const err = (await refused.exit.catch((e: unknown) => e)) as RunnerRefusedError;
    expect(err).toBeInstanceOf(RunnerRefusedError);
    expect(err).toMatchObject({ code: 'workspace', workspace: ['2049', '5'] });
  });

  it('rejects everything pending, and everything later, once the connection closes', async () => {
    const w = wire();
    const { exit } = w.connection.run(RUN, () => undefined);
    w.close();
    await expect(exit).rejects.toBeInstanceOf(RunnerGoneError);
    await expect(w.connection.hello).rejects.toBeInstanceOf(RunnerGoneError);
    await expect(w.connection.ping(1000)).rejects.toBeInstanceOf(RunnerGoneError);
    expect(w.connection.isClosed).toBe(true);
  });

  it('closes on garbage or an endless line', async () => {
    const garbage = wire();
    const pending = garbage.connection.ping(1000);
    garbage.fromRunner.write('not json\n');
    await expect(pending).rejects.toBeInstanceOf(RunnerProtocolError);

    const endless = wire();
    const waiting = endless.connection.ping(1000);
    endless.fromRunner.write(Buffer.alloc(13 * 1024 * 1024, 0x61)); // past the 12 MiB a rich result may take
    await expect(waiting).rejects.toThrow('over');
  });
});

const WORKSPACE: [string, string] = ['2049', '7'];

const CELL_DONE = {
  kernel: 'krn_1',
  count: 3,
  ok: true,
  result: '42',
  error: null,
  exitCode: 0,
  interrupted: false,
  timedOut: false,
  ended: null,
  capped: { stdout: false, stderr: false },
  stateLost: false,
  oomKilled: null,
  kernelExit: null,
  durationMs: 4.5,
};

describe('RunnerConnection, kernels and processes (protocol 3)', () => {
  it('starts a kernel and resolves with its pid once it is ready', async () => {
    const w = wire();
    const started = w.connection.kernelStart({
      kernel: 'krn_1',
      language: 'node',
      interpreter: '/run/interpreters/node/node',
      env: { PATH: '/usr/bin' },
      workspace: WORKSPACE,
    });
    await w.settle();
    expect(w.sent[0]).toEqual({
      op: 'kernel_start',
      id: 1,
      kernel: 'krn_1',
      language: 'node',
      interpreter: '/run/interpreters/node/node',
      env: { PATH: '/usr/bin' },
      workspace: WORKSPACE,
    });
    w.reply({ ev: 'kernel_ready', id: 1, kernel: 'krn_1', pid: 12 });
    await expect(started).resolves.toEqual({ pid: 12 });

    const failed = w.connection.kernelStart({
      kernel: 'krn_2',
      language: 'python',
      env: {},
      workspace: WORKSPACE,
    });
    w.reply({ ev: 'error', id: 2, code: 'kernel_start', message: 'the python kernel ended: Traceback…' });
    await expect(failed).rejects.toMatchObject({
      code: 'kernel_start',
      message: expect.stringContaining('Traceback'),
    });
  });

  it('streams a cell’s output with its id and resolves its outcome', async () => {
    const w = wire();
    const chunks: Array<[number, string, number]> = [];
    const { id, done } = w.connection.cell(
      {
        kernel: 'krn_1',
        code: 'print(1)\n41 + 1',
        env: { A: 'b' },
        timeoutMs: 1000,
        graceMs: 200,
        capBytes: 100,
        capLines: 10,
      },
      (fd, data, from) => chunks.push([fd, data.toString('utf8'), from]),
    );
    await w.settle();
    expect(w.sent[0]).toMatchObject({ op: 'cell', id, kernel: 'krn_1', env: { A: 'b' }, graceMs: 200 });
    w.reply({ ev: 'out', id, fd: 1, data: Buffer.from('1\n').toString('base64') });
    w.reply({ ...CELL_DONE, ev: 'cell_done', id });
    await expect(done).resolves.toMatchObject({ count: 3, ok: true, result: '42', oomKilled: null });
    expect(chunks).toEqual([[1, '1\n', id]]);
  });

  it('hands a cell’s rich results to onDisplay in order, and passes its caps on', async () => {
    const w = wire();
    const shown: Array<Record<string, unknown>> = [];
    const results = { maxBytes: 2048, cellMaxBytes: 4096 };
    const { id, done } = w.connection.cell(
      { kernel: 'krn_1', code: 'x', env: {}, timeoutMs: 1000, graceMs: 1, capBytes: 1, capLines: 1, results },
      () => undefined,
      (result) => shown.push(result),
    );
    await w.settle();
    expect(w.sent[0]).toMatchObject({ op: 'cell', id, results });
    w.reply({ ev: 'display', id, result: { data: { 'text/html': '<b>1</b>', 'text/plain': '1' } } });
    w.reply({ ev: 'display', id, result: 'not a bundle' });
    w.reply({ ev: 'display', id, result: { data: { 'text/plain': '2' }, isMainResult: true } });
    w.reply({ ...CELL_DONE, ev: 'cell_done', id });
    await done;
    expect(shown).toEqual([
      { data: { 'text/html': '<b>1</b>', 'text/plain': '1' } },
      { data: { 'text/plain': '2' }, isMainResult: true },
    ]);
  });

  it('reports a refused cell with the runner’s code', async () => {
    const w = wire();
    const busy = w.connection.cell(
      { kernel: 'krn_1', code: '1', env: {}, timeoutMs: 1, graceMs: 1, capBytes: 1, capLines: 1 },
      () => undefined,
    );
    w.reply({ ev: 'error', id: busy.id, code: 'busy', message: 'kernel krn_1 is running a cell' });
    await expect(busy.done).rejects.toBeInstanceOf(RunnerRefusedError);
    await expect(busy.done).rejects.toMatchObject({ code: 'busy' });
  });

  it('interrupts and stops kernels, and starts, feeds and signals processes', async () => {
    const w = wire();
    const interrupted = w.connection.kernelInterrupt('krn_1');
    const stopped = w.connection.kernelStop('krn_2');
    const proc = w.connection.procStart({
      proc: 'prc_1',
      command: 'npm run dev',
      cwd: 'app',
      env: { PATH: '/usr/bin' },
      workspace: WORKSPACE,
    });
    const written = w.connection.procWrite('prc_1', 'y\n', true);
    const signalled = w.connection.procSignal('prc_1', 'TERM');
    await w.settle();
    expect(w.sent).toEqual([
      { op: 'kernel_interrupt', id: 1, kernel: 'krn_1' },
      { op: 'kernel_stop', id: 2, kernel: 'krn_2' },
      {
        op: 'proc_start',
        id: 3,
        proc: 'prc_1',
        command: 'npm run dev',
        cwd: 'app',
        env: { PATH: '/usr/bin' },
        workspace: WORKSPACE,
      },
      { op: 'proc_write', id: 4, proc: 'prc_1', data: 'y\n', eof: true },
      { op: 'proc_signal', id: 5, proc: 'prc_1', signal: 'TERM' },
    ]);
    w.reply({ ev: 'ack', id: 1, found: true, running: true });
    w.reply({ ev: 'ack', id: 2, found: false });
    w.reply({ ev: 'proc_started', id: 3, proc: 'prc_1', pid: 30 });
    w.reply({ ev: 'error', id: 4, code: 'closed', message: 'the stdin of process prc_1 is closed' });
    w.reply({ ev: 'ack', id: 5, found: true });
    await expect(interrupted).resolves.toEqual({ found: true, running: true });
    await expect(stopped).resolves.toEqual({ found: false });
    await expect(proc).resolves.toEqual({ pid: 30 });
    await expect(written).rejects.toMatchObject({ code: 'closed' });
    await expect(signalled).resolves.toEqual({ found: true });
  });

  it('hands unsolicited events to every listener, decoded, until it unsubscribes', async () => {
    const w = wire();
    const seen: unknown[] = [];
    const other: string[] = [];
    w.connection.onEvent(() => {
      throw new Error('a broken listener');
    });
    const unsubscribe = w.connection.onEvent((event) => seen.push(event));
    w.connection.onEvent((event) => other.push(event.ev));
    w.reply({ ev: 'pout', proc: 'prc_1', fd: 2, data: Buffer.from('listening\n').toString('base64') });
    w.reply({ ev: 'pexit', proc: 'prc_1', exitCode: null, signal: 'SIGTERM' });
    w.reply({ ev: 'kernel_exit', kernel: 'krn_1', exitCode: 3, signal: null, oomKilled: null });
    await w.settle();
    expect(seen).toEqual([
      { ev: 'pout', proc: 'prc_1', fd: 2, data: Buffer.from('listening\n') },
      { ev: 'pexit', proc: 'prc_1', exitCode: null, signal: 'SIGTERM' },
      { ev: 'kernel_exit', kernel: 'krn_1', exitCode: 3, signal: null, oomKilled: null },
    ]);
    unsubscribe();
    w.reply({ ev: 'pexit', proc: 'prc_2', exitCode: 0, signal: null });
    await w.settle();
    expect(seen).toHaveLength(3);
    expect(other).toEqual(['pout', 'pexit', 'kernel_exit', 'pexit']);
    expect(w.connection.isClosed).toBe(false);
  });

  it('rejects kernel and process requests once the connection is gone', async () => {
    const w = wire();
    const cell = w.connection.cell(
      {
        kernel: 'krn_1',
        code: 'while True: pass',
        env: {},
        timeoutMs: 1,
        graceMs: 1,
        capBytes: 1,
        capLines: 1,
      },
      () => undefined,
    );
    w.close();
    await expect(cell.done).rejects.toBeInstanceOf(RunnerGoneError);
    await expect(w.connection.procSignal('prc_1', 'KILL')).rejects.toBeInstanceOf(RunnerGoneError);
  });
});

describe('RunnerConnection, protocol 5', () => {
  const b64 = (text: string) => Buffer.from(text).toString('base64');

  it('opens a tunnel, routes its bytes to it (even those read with the answer) and names who listens', async () => {
    const w = wire();
    const opening = w.connection.openTunnel(3000);
    await w.settle();
    const tunnel = String(w.sent[0].tunnel);
    expect(w.sent).toEqual([{ op: 'tunnel_open', id: 1, tunnel, port: 3000 }]);
    expect(tunnel).toMatch(/^tun_[0-9a-f]{16}$/);
    // One chunk: the answer and the server's first bytes and end, before `openTunnel` resumes.
    w.fromRunner.write(
      [
        { ev: 'tunnel_opened', id: 1, tunnel, proc: 'prc_1', kernel: null },
        { ev: 'tdata', tunnel, data: b64('HTTP/1.1 200 OK\r\n') },
        { ev: 'tend', tunnel },
      ]
        .map((m) => `${JSON.stringify(m)}\n`)
        .join(''),
    );
    const stream = await opening;
    expect([stream.id, stream.proc, stream.kernel]).toEqual([tunnel, 'prc_1', null]);
    let read = '';
    for await (const chunk of stream) read += (chunk as Buffer).toString('utf8');
    expect(read).toBe('HTTP/1.1 200 OK\r\n');
    // What it consumed is acknowledged, so the runner's window never stays shut.
    expect(w.sent).toContainEqual({ op: 'tunnel_ack', tunnel, bytes: 17 });
  });

  it('refuses a tunnel with code connect when nothing listens', async () => {
    const w = wire();
    const opening = w.connection.openTunnel(3001);
    await w.settle();
    w.reply({ ev: 'error', id: 1, code: 'connect', message: 'nothing accepts connections on port 3001: …' });
    await expect(opening).rejects.toBeInstanceOf(RunnerRefusedError);
    await expect(opening).rejects.toMatchObject({ code: 'connect' });
    await w.settle();
    expect(w.sent).toHaveLength(1); // nothing to close
  });

  it('sends writes one ack at a time, end() as eof, and destroy() as tunnel_close', async () => {
    const w = wire();
    const opening = w.connection.openTunnel(3002);
    await w.settle();
    const tunnel = String(w.sent[0].tunnel);
    w.reply({ ev: 'tunnel_opened', id: 1, tunnel, proc: null, kernel: 'krn_1' });
    const stream = await opening;
    let written = false;
    stream.write(Buffer.alloc(300 * 1024, 1), () => (written = true));
    await w.settle();
    // 256 KiB pieces: the second waits for the first one's ack.
    expect(w.sent.slice(1).map((m) => [m.op, m.id, Buffer.from(String(m.data), 'base64').length])).toEqual([
      ['tunnel_write', 2, 256 * 1024],
    ]);
    w.reply({ ev: 'ack', id: 2, found: true });
    await w.settle();
    expect(w.sent[2]).toMatchObject({ op: 'tunnel_write', id: 3, eof: false });
    expect(written).toBe(false);
    w.reply({ ev: 'ack', id: 3, found: true });
    await w.settle();
    expect(written).toBe(true);
    stream.end();
    await w.settle();
    expect(w.sent[3]).toEqual({ op: 'tunnel_write', id: 4, tunnel, data: '', eof: true });
    w.reply({ ev: 'ack', id: 4, found: true });
    await w.settle();
    stream.destroy();
    await w.settle();
    expect(w.sent[4]).toEqual({ op: 'tunnel_close', id: 5, tunnel });
  });

  it('destroys a tunnel whose socket failed, and every tunnel when the connection goes', async () => {
    const w = wire();
    const streams = [];
    for (const id of [1, 2]) {
      const opening = w.connection.openTunnel(3003);
      await w.settle();
      w.reply({ ev: 'tunnel_opened', id, tunnel: w.sent[id - 1].tunnel, proc: null, kernel: null });
      streams.push(await opening);
    }
    const errors = streams.map(
      (s) => new Promise<Error>((resolve) => s.once('error', (err: Error) => resolve(err))),
    );
    w.reply({ ev: 'tclosed', tunnel: w.sent[0].tunnel, error: 'connection reset by peer (ECONNRESET)' });
    await expect(errors[0]).resolves.toMatchObject({
      message: 'tunnel to the box: connection reset by peer (ECONNRESET)',
    });
    const pendingOpen = w.connection.openTunnel(3004);
    w.close();
    await expect(errors[1]).resolves.toMatchObject({
      message: 'tunnel to the box: the runner connection closed',
    });
    await expect(pendingOpen).rejects.toBeInstanceOf(RunnerGoneError);
    expect(w.sent.filter((m) => m.op === 'tunnel_close')).toEqual([]); // the sockets are gone already
  });

  it('opens, types into, resizes and closes terminals, and lists ports', async () => {
    const w = wire();
    const opened = w.connection.termOpen({
      term: 'trm_1',
      cols: 80,
      rows: 24,
      env: { TERM: 'xterm-256color' },
      cwd: '',
      workspace: WORKSPACE,
      command: 'top',
    });
    const typed = w.connection.termWrite('trm_1', Buffer.from('\x03'));
    const resized = w.connection.termResize('trm_1', 120, 40);
    const closed = w.connection.termClose('trm_2');
    const ports = w.connection.listPorts();
    await w.settle();
    expect(w.sent).toEqual([
      {
        op: 'term_open',
        id: 1,
        term: 'trm_1',
        cols: 80,
        rows: 24,
        env: { TERM: 'xterm-256color' },
        cwd: '',
        workspace: WORKSPACE,
        command: 'top',
      },
      { op: 'term_write', id: 2, term: 'trm_1', data: b64('\x03') },
      { op: 'term_resize', id: 3, term: 'trm_1', cols: 120, rows: 40 },
      { op: 'term_close', id: 4, term: 'trm_2' },
      { op: 'ports', id: 5 },
    ]);
    w.reply({ ev: 'term_started', id: 1, term: 'trm_1', pid: 40 });
    w.reply({ ev: 'ack', id: 2, found: true });
    w.reply({ ev: 'ack', id: 3, found: true });
    w.reply({ ev: 'ack', id: 4, found: false });
    w.reply({
      ev: 'ports',
      id: 5,
      ports: [
        { port: 3000, address: '0.0.0.0', proc: 'prc_1', kernel: null },
        { port: 8888, address: '::', proc: null, kernel: 'krn_1' },
      ],
    });
    await expect(opened).resolves.toEqual({ pid: 40 });
    await expect(typed).resolves.toEqual({ found: true });
    await expect(resized).resolves.toEqual({ found: true });
    await expect(closed).resolves.toEqual({ found: false });
    await expect(ports).resolves.toEqual([
      { port: 3000, address: '0.0.0.0', proc: 'prc_1', kernel: null },
      { port: 8888, address: '::', proc: null, kernel: 'krn_1' },
    ]);
  });

  it('types a long paste in pieces, each after the ack of the one before', async () => {
    const w = wire();
    const typed = w.connection.termWrite('trm_1', Buffer.alloc(600 * 1024, 'a'));
    const sizes = () => w.sent.map((m) => Buffer.from(String(m.data), 'base64').length);
    await w.settle();
    expect(sizes()).toEqual([256 * 1024]);
    w.reply({ ev: 'ack', id: 1, found: true });
    await w.settle();
    w.reply({ ev: 'ack', id: 2, found: true });
    await w.settle();
    expect(sizes()).toEqual([256 * 1024, 256 * 1024, 88 * 1024]);
    w.reply({ ev: 'ack', id: 3, found: true });
    await expect(typed).resolves.toEqual({ found: true });
  });

  it('hands terminal output and exits to the listeners, decoded', async () => {
    const w = wire();
    const seen: unknown[] = [];
    w.connection.onEvent((event) => seen.push(event));
    w.reply({ ev: 'tout', term: 'trm_1', data: b64('$ ') });
    w.reply({ ev: 'texit', term: 'trm_1', exitCode: null, signal: 'SIGHUP' });
    w.reply({ ev: 'tdata', tunnel: 'tun_unknown', data: b64('late') }); // a tunnel this side forgot: ignored
    await w.settle();
    expect(seen).toEqual([
      { ev: 'tout', term: 'trm_1', data: Buffer.from('$ ') },
      { ev: 'texit', term: 'trm_1', exitCode: null, signal: 'SIGHUP' },
    ]);
    expect(w.connection.isClosed).toBe(false);
  });
});

describe('RunnerConnection, protocol 6', () => {
  it('asks for a workspace snapshot and resolves the tool answer in it, refusals as RunnerRefusedError', async () => {
    const w = wire();
    const bounds = { maxEntries: 10_000, maxScanEntries: 100_000, workspace: RUN.workspace };
    const walked = w.connection.snapshot(bounds);
    await w.settle();
    expect(w.sent).toEqual([{ op: 'snapshot', id: 1, ...bounds }]);
    const snapshot = { entries: [['a.txt', '3:1700000000000000000:42']], partial: false };
    w.reply({ ev: 'snapshot', id: 1, ok: true, snapshot });
    await expect(walked).resolves.toEqual({ ok: true, snapshot });

    const refused = w.connection.snapshot({ ...bounds, workspace: ['1', '2'] });
    w.reply({ ev: 'error', id: 2, code: 'workspace', message: '/workspace is …', workspace: ['5', '6'] });
    await expect(refused).rejects.toMatchObject({ code: 'workspace', workspace: ['5', '6'] });
    const large = w.connection.snapshot(bounds);
    w.reply({
      ev: 'error',
      id: 3,
      code: 'snapshot_size',
      message: "the snapshot's answer is over 4194304 bytes",
    });
    await expect(large).rejects.toBeInstanceOf(RunnerRefusedError);

    const lost = w.connection.snapshot(bounds);
    w.close();
    await expect(lost).rejects.toBeInstanceOf(RunnerGoneError);
  });
});
