import { InvalidInputError, systemClock } from '@switchyard/common';
import type { RunnerConnection } from '../runner/runner-connection';
import { ProcessLimitError, SessionProcesses } from './session-processes';
import { type StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type { ProcessStart } from './stateful.types';

/** A subprocess-tier box of `sessionId` around `connection`, that never closes. */
const boxOf = (sessionId: string, connection: RunnerConnection): StatefulBox => ({
  tier: 'subprocess',
  sessionId,
  connection,
  workspace: ['1', '2'],
  interpreters: {},
  closed: new Promise<void>(() => undefined),
  pin: () => () => undefined,
});

/** A box whose runner starts every command after `delayMs`, as a box opening and a runner answering take time. */
class SlowHost extends StatefulBoxHost {
  readonly tier = 'subprocess' as const;
  readonly memoryBytes = 1 << 30;
  failNext = false;
  private pid = 100;

  constructor(private readonly delayMs: number) {
    super();
  }

  box(sessionId: string): Promise<StatefulBox> {
    const connection = {
      onEvent: () => undefined,
      procStart: async () => {
        await new Promise((resolve) => setTimeout(resolve, this.delayMs));
        if (this.failNext) {
          this.failNext = false;
          throw new Error('runner gone');
        }
        return { pid: this.pid++ };
      },
    } as unknown as RunnerConnection;
    return Promise.resolve(boxOf(sessionId, connection));
  }

  existing(): StatefulBox | undefined {
    return undefined;
  }

  discard(): Promise<void> {
    return Promise.resolve();
  }
}

const spec = (name?: string): ProcessStart => ({
  actionId: 'act_1',
  sessionId: 'ses_1',
  command: 'sleep 600',
  env: {},
  baseEnv: {},
  tier: 'subprocess',
  workspaceDir: '/tmp/ws',
  ...(name !== undefined && { name }),
});

describe('SessionProcesses', () => {
  const make = (host: SlowHost) =>
    new SessionProcesses(
      [host],
      { maxPerSession: 3, maxPerSessionSetting: 'SWITCHYARD_MAX_PROCESSES', logBytes: 1024, redact: [] },
      systemClock,
    );

  it('holds a slot for each start under way: concurrent starts never overshoot the limit', async () => {
    const processes = make(new SlowHost(20));
    const results = await Promise.allSettled(Array.from({ length: 10 }, () => processes.start(spec())));
    expect(results.filter((r) => r.status === 'fulfilled')).toHaveLength(3);
    const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected');
    expect(refused).toHaveLength(7);
    for (const r of refused) expect(r.reason).toBeInstanceOf(ProcessLimitError);
    expect(processes.list('ses_1').filter((p) => p.running)).toHaveLength(3);
    expect(() => processes.checkStart('ses_1')).toThrow(ProcessLimitError);
  });

  it('holds the name of a start under way, and frees slot and name when the start fails', async () => {
    const host = new SlowHost(20);
    const processes = make(host);
    host.failNext = true;
    const first = processes.start(spec('web'));
    // While the first is starting, its name is taken and it counts against the limit.
    expect(() => processes.checkStart('ses_1', 'web')).toThrow(InvalidInputError);
    await expect(first).rejects.toMatchObject({ code: 'PROCESS_START' });
    expect(() => processes.checkStart('ses_1', 'web')).not.toThrow();
    const started = await Promise.all([processes.start(spec('web')), processes.start(spec())]);
    expect(started.map((p) => p.name)).toEqual(['web', undefined]);
    expect(processes.list('ses_1')).toHaveLength(2);
  });
});

/** A runner that answers a start with the command's output and exit in the same read as its `proc_started`. */
class InstantHost extends StatefulBoxHost {
  readonly tier = 'subprocess' as const;
  readonly memoryBytes = 1 << 30;

  box(sessionId: string): Promise<StatefulBox> {
    const listeners: Array<(e: unknown) => void> = [];
    const connection = {
      onEvent: (l: (e: unknown) => void) => listeners.push(l),
      procStart: (request: { proc: string }) =>
        new Promise((resolve) => {
          // As RunnerConnection parses one chunk: the start's reply settles its promise, then the next lines are
          // dispatched before any continuation of that promise runs.
          resolve({ pid: 7 });
          for (const l of listeners) {
            l({
              ev: 'pout',
              proc: request.proc,
              fd: 1,
              data: Buffer.from('hello from env'),
            });
            l({ ev: 'pexit', proc: request.proc, exitCode: 0, signal: null });
          }
        }),
    } as unknown as RunnerConnection;
    return Promise.resolve(boxOf(sessionId, connection));
  }

  existing(): StatefulBox | undefined {
    return undefined;
  }

  discard(): Promise<void> {
    return Promise.resolve();
  }
}

describe('SessionProcesses, a command that ends at once', () => {
  it('keeps the output and the exit that came before its start was registered', async () => {
    const processes = new SessionProcesses(
      [new InstantHost()],
      { maxPerSession: 3, maxPerSessionSetting: 'SWITCHYARD_MAX_PROCESSES', logBytes: 1024, redact: [] },
      systemClock,
    );
    const started = await processes.start({ ...spec('greet'), command: 'printf hello' });
    const info = processes.get('ses_1', started.id);
    expect(info).toMatchObject({ running: false, exitCode: 0 });
    expect(
      processes
        .logs('ses_1', started.id)
        .entries.map((e) => e.text)
        .join(''),
    ).toBe('hello from env');
  });
});
