import { PassThrough } from 'node:stream';
import { RUNNER_EXIT_OK } from '../../test/runner-exit';
import {
  RUNNER_PROTOCOL,
  RunnerConnection,
  RunnerGoneError,
  RunnerProtocolError,
  RunnerRefusedError,
  RunnerTimeoutError,
} from './runner-connection';

/** Both ends of a runner connection: what the engine wrote, and a way to answer as the runner. */
function wire() {
  const toRunner = new PassThrough();
  const fromRunner = new PassThrough();
  let close!: () => void;
  const closed = new Promise<void>((resolve) => (close = resolve));
  const sent: Array<Record<string, unknown>> = [];
  let buffered = '';
  toRunner.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) sent.push(JSON.parse(line) as Record<string, unknown>);
  });
  const connection = new RunnerConnection({
    stdin: toRunner,
    stdout: fromRunner,
    closed,
    close: () => close(),
  });
  const reply = (message: Record<string, unknown>) => fromRunner.write(`${JSON.stringify(message)}\n`);
  const settle = () => new Promise((r) => setImmediate(r));
  return { connection, sent, reply, fromRunner, close, settle };
}

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
    endless.fromRunner.write(Buffer.alloc(2 * 1024 * 1024, 0x61));
    await expect(waiting).rejects.toThrow('over');
  });
});
