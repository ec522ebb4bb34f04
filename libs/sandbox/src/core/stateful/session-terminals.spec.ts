import { type Clock, InvalidInputError, NotFoundError } from '@switchyard/common';
import { type RunnerConnection } from '../runner/runner-connection';
import { type TermOpenRequest } from '../runner/runner-protocol';
import { RunnerRefusedError } from '../runner/runner.errors';
import {
  SessionTerminals,
  type TerminalClient,
  TerminalClosedError,
  TerminalLimitError,
} from './session-terminals';
import { type StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type { TerminalInfo, TerminalOpen } from './stateful.types';

/** A runner with a PTY that echoes what is typed, as bash's readline does, and prints a prompt when it starts. */
class FakeRunner {
  readonly opened: TermOpenRequest[] = [];
  readonly resized: Array<[string, number, number]> = [];
  refuseCwd = false;
  delayMs = 0;
  private readonly listeners = new Set<(event: { ev: string }) => void>();
  private readonly live = new Set<string>();

  onEvent(listener: (event: { ev: string }) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async termOpen(req: TermOpenRequest): Promise<{ pid: number }> {
    if (this.delayMs) await new Promise((resolve) => setTimeout(resolve, this.delayMs));
    if (this.refuseCwd) throw new RunnerRefusedError('runner refused: cwd is not a directory', 'cwd');
    this.opened.push(req);
    this.live.add(req.term);
    // The prompt is read in the same chunk as the answer: it comes before `termOpen` resolves.
    this.emit({ ev: 'tout', term: req.term, data: Buffer.from('$ ') });
    return { pid: 4242 };
  }

  termWrite(term: string, data: Buffer): Promise<{ found: boolean }> {
    if (!this.live.has(term)) return Promise.resolve({ found: false });
    this.emit({ ev: 'tout', term, data });
    return Promise.resolve({ found: true });
  }

  termResize(term: string, cols: number, rows: number): Promise<{ found: boolean }> {
    this.resized.push([term, cols, rows]);
    return Promise.resolve({ found: this.live.has(term) });
  }

  termClose(term: string): Promise<{ found: boolean }> {
    const found = this.live.has(term);
    if (found) setImmediate(() => this.exit(term, null, 'SIGHUP'));
    return Promise.resolve({ found });
  }

  /** The shell exits by itself (`exit 3`). */
  exit(term: string, exitCode: number | null, signal: string | null = null): void {
    if (!this.live.delete(term)) return;
    this.emit({ ev: 'texit', term, exitCode, signal });
  }

  output(term: string, text: string): void {
    this.emit({ ev: 'tout', term, data: Buffer.from(text) });
  }

  private emit(event: Record<string, unknown> & { ev: string }): void {
    for (const l of this.listeners) l(event);
  }
}

class FakeHost extends StatefulBoxHost {
  readonly tier = 'pooled' as const;
  readonly memoryBytes = 1 << 30;
  readonly runner = new FakeRunner();
  pins = 0;
  private closeBox!: () => void;
  private current?: StatefulBox;

  box(sessionId: string): Promise<StatefulBox> {
    this.current ??= {
      tier: 'pooled',
      sessionId,
      connection: this.runner as unknown as RunnerConnection,
      workspace: ['1', '2'],
      interpreters: {},
      closed: new Promise<void>((resolve) => (this.closeBox = resolve)),
      pin: () => {
        this.pins++;
        let held = true;
        return () => {
          if (held) this.pins--;
          held = false;
        };
      },
    };
    return Promise.resolve(this.current);
  }

  existing(): StatefulBox | undefined {
    return this.current;
  }

  /** The container died. */
  lose(): void {
    this.closeBox();
  }

  discard(): Promise<void> {
    return Promise.resolve();
  }
}

class FakeClock implements Clock {
  ms = 0;
  now(): Date {
    return new Date(1_700_000_000_000 + this.ms);
  }
  monotonic(): number {
    return this.ms;
  }
}

/** A client that keeps what it got. */
class Screen implements TerminalClient {
  text = '';
  endedWith?: TerminalInfo;
  output(data: Buffer): void {
    this.text += data.toString('utf8');
  }
  ended(info: TerminalInfo): void {
    this.endedWith = info;
  }
}

const spec = (over: Partial<TerminalOpen> = {}): TerminalOpen => ({
  sessionId: 'ses_1',
  cols: 80,
  rows: 24,
  env: { FOO: 'bar' },
  baseEnv: { HOME: '/workspace/.home', TERM: 'dumb' },
  tier: 'pooled',
  workspaceDir: '/tmp/ws',
  ...over,
});

const tick = () => new Promise((resolve) => setImmediate(resolve));

describe('SessionTerminals', () => {
  let host: FakeHost;
  let clock: FakeClock;
  let terminals: SessionTerminals;

  beforeEach(() => {
    host = new FakeHost();
    clock = new FakeClock();
    terminals = new SessionTerminals(
      [host],
      {
        maxPerSession: 2,
        maxPerSessionSetting: 'SWITCHYARD_MAX_TERMINALS_PER_SESSION',
        idleMs: 60_000,
        scrollbackBytes: 1024,
        closeWaitMs: 200,
      },
      clock,
    );
  });
  afterEach(() => terminals.shutdown());

  it('opens a PTY in the session box with the environment, TERM set by the engine, and pins the box', async () => {
    const info = await terminals.open(spec({ cwd: 'src', command: 'top' }));
    expect(info).toMatchObject({ status: 'open', tier: 'pooled', cols: 80, rows: 24, pid: 4242, cwd: 'src' });
    expect(info.id).toMatch(/^trm_[0-9a-f]{16}$/);
    expect(host.runner.opened[0]).toEqual({
      term: info.id,
      cols: 80,
      rows: 24,
      cwd: 'src',
      command: 'top',
      env: { HOME: '/workspace/.home', TERM: 'xterm-256color', FOO: 'bar' },
      workspace: ['1', '2'],
    });
    expect(host.pins).toBe(1);
    expect(terminals.liveTiers('ses_1')).toEqual(['pooled']);
  });

  it('fans output out to every client; any of them may type; a late client gets the scrollback first', async () => {
    const { id } = await terminals.open(spec());
    const a = new Screen();
    const first = terminals.attach('ses_1', id, a);
    // The prompt came before the open was registered: it is in the scrollback, not lost.
    expect(first.scrollback.toString()).toBe('$ ');
    const b = new Screen();
    terminals.attach('ses_1', id, b);
    await terminals.write('ses_1', id, Buffer.from('ls\r'));
    host.runner.output(id, 'file.txt\r\n$ ');
    expect(a.text).toBe('ls\rfile.txt\r\n$ ');
    expect(b.text).toBe(a.text);
    first.detach();
    host.runner.output(id, 'more');
    expect(a.text).not.toContain('more');

    const c = new Screen();
    const again = terminals.attach('ses_1', id, c);
    expect(again.scrollback.toString()).toBe('$ ls\rfile.txt\r\n$ more');
    expect(terminals.get('ses_1', id)).toMatchObject({ bytesIn: 3, bytesOut: 21, clients: 2 });
  });

  it('a client that throws disturbs neither the terminal nor the other clients', async () => {
    const { id } = await terminals.open(spec());
    terminals.attach('ses_1', id, {
      output: () => {
        throw new Error('socket gone');
      },
      ended: () => undefined,
    });
    const ok = new Screen();
    terminals.attach('ses_1', id, ok);
    host.runner.output(id, 'hello');
    expect(ok.text).toBe('hello');
  });

  it('resizes, and refuses input, resize and clients once the shell has exited (409), keeping the record', async () => {
    const ended: TerminalInfo[] = [];
    terminals.listen({ terminalEnded: (info) => ended.push(info) });
    const { id } = await terminals.open(spec());
    expect(await terminals.resize('ses_1', id, 120, 40)).toMatchObject({ cols: 120, rows: 40 });
    const screen = new Screen();
    terminals.attach('ses_1', id, screen);
    host.runner.exit(id, 3);
    expect(screen.endedWith).toMatchObject({ status: 'closed', exitCode: 3, endReason: 'exited' });
    expect(ended).toEqual([expect.objectContaining({ id, exitCode: 3, endReason: 'exited' })]);
    expect(host.pins).toBe(0);
    await expect(terminals.write('ses_1', id, Buffer.from('x'))).rejects.toBeInstanceOf(TerminalClosedError);
    await expect(terminals.resize('ses_1', id, 10, 10)).rejects.toBeInstanceOf(TerminalClosedError);
    expect(() => terminals.attach('ses_1', id, new Screen())).toThrow(TerminalClosedError);
    expect(terminals.get('ses_1', id)).toMatchObject({ status: 'closed', exitCode: 3 });
    expect(terminals.liveTiers('ses_1')).toEqual([]);
  });

  it('closes on request, answering once the shell has ended', async () => {
    const { id } = await terminals.open(spec());
    const closed = await terminals.close('ses_1', id);
    expect(closed).toMatchObject({ status: 'closed', endReason: 'closed', signal: 'SIGHUP' });
    await expect(terminals.close('ses_1', id)).rejects.toBeInstanceOf(TerminalClosedError);
  });

  it('takes a terminal whose box does not report the exit in time for gone', async () => {
    const { id } = await terminals.open(spec());
    jest.spyOn(host.runner, 'termClose').mockResolvedValue({ found: true });
    expect(await terminals.close('ses_1', id)).toMatchObject({ status: 'closed', signal: 'SIGKILL' });
  });

  it('holds a slot for each open under way: concurrent opens never overshoot the limit', async () => {
    host.runner.delayMs = 10;
    const results = await Promise.allSettled(Array.from({ length: 5 }, () => terminals.open(spec())));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(2);
    for (const r of results.filter((r): r is PromiseRejectedResult => r.status === 'rejected')) {
      expect(r.reason).toBeInstanceOf(TerminalLimitError);
      expect((r.reason as Error).message).toMatch(/SWITCHYARD_MAX_TERMINALS_PER_SESSION/);
    }
    // Another session has its own limit.
    await expect(terminals.open(spec({ sessionId: 'ses_2' }))).resolves.toMatchObject({ status: 'open' });
  });

  it('closes a terminal nobody is attached to and nothing is written to after the idle time', async () => {
    const watched = await terminals.open(spec());
    const idle = await terminals.open(spec());
    terminals.attach('ses_1', watched.id, new Screen());
    clock.ms += 59_000;
    host.runner.output(idle.id, 'still busy');
    clock.ms += 59_000;
    terminals.sweep();
    await tick();
    expect(terminals.get('ses_1', idle.id).status).toBe('open');
    clock.ms += 2_000;
    terminals.sweep();
    await tick();
    await tick();
    expect(terminals.get('ses_1', idle.id)).toMatchObject({ status: 'closed', endReason: 'idle' });
    expect(terminals.get('ses_1', watched.id).status).toBe('open');
  });

  it('ends with its box', async () => {
    const { id } = await terminals.open(spec());
    host.lose();
    await tick();
    expect(terminals.get('ses_1', id)).toMatchObject({ status: 'closed', endReason: 'sandbox_lost' });
  });

  it('closes and forgets the terminals of an ended session', async () => {
    const { id } = await terminals.open(spec());
    await terminals.releaseSession('ses_1');
    expect(() => terminals.get('ses_1', id)).toThrow(NotFoundError);
    expect(host.pins).toBe(0);
  });

  it('answers a directory the box refuses as a 400 naming cwd, and frees the slot', async () => {
    host.runner.refuseCwd = true;
    await expect(terminals.open(spec({ cwd: 'nope' }))).rejects.toMatchObject({
      constructor: InvalidInputError,
      field: 'cwd',
    });
    host.runner.refuseCwd = false;
    await terminals.open(spec());
    await terminals.open(spec());
  });

  it('takes an id made ahead, once', async () => {
    const id = 'trm_0123456789abcdef';
    expect((await terminals.open(spec({ id }))).id).toBe(id);
    await expect(terminals.open(spec({ id }))).rejects.toMatchObject({ code: 'TERMINAL_EXISTS' });
    await expect(terminals.open(spec({ id: 'trm_x' }))).rejects.toBeInstanceOf(InvalidInputError);
  });
});
