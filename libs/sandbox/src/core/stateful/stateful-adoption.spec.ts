import { systemClock } from '@switchyard/common';
import type { CellDone, RunnerEvent } from '../runner/runner-protocol';
import type { RunnerConnection } from '../runner/runner-connection';
import { SessionKernels } from './session-kernels';
import { SessionProcesses } from './session-processes';
import { type AdoptedBox, type StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type { CellJob } from './stateful.types';

const KERNEL = 'krn_0123456789abcdef';
const PROC = 'prc_0123456789abcdef';

/** A runner connection that records what it is asked, answers cells, and lets the test send its events. */
function fakeConnection() {
  const listeners = new Set<(e: RunnerEvent) => void>();
  const cells: Array<{ kernel: string; code: string }> = [];
  const connection = {
    onEvent: (l: (e: RunnerEvent) => void) => {
      listeners.add(l);
      return () => listeners.delete(l);
    },
    cell: (request: { kernel: string; code: string }) => {
      cells.push(request);
      const done: CellDone = {
        kernel: request.kernel,
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
        oomKilled: false,
        kernelExit: null,
        durationMs: 1,
      };
      return { id: 1, done: Promise.resolve(done) };
    },
    kernelStart: () => Promise.reject(new Error('no kernel is started: the adopted one is used')),
    kernelStop: () => Promise.resolve({ found: true }),
    procSignal: () => Promise.resolve({ found: true }),
  } as unknown as RunnerConnection;
  const emit = (e: RunnerEvent) => listeners.forEach((l) => l(e));
  return { connection, cells, emit };
}

/** A pooled host whose one box is adopted with a kernel and a process alive in it. */
class AdoptingHost extends StatefulBoxHost {
  readonly tier = 'pooled' as const;
  readonly memoryBytes = 1 << 30;
  pins = 0;
  readonly wire = fakeConnection();
  readonly theBox: StatefulBox = {
    tier: 'pooled',
    sessionId: 'ses_1',
    connection: this.wire.connection,
    workspace: ['1', '2'],
    interpreters: {},
    closed: new Promise<void>(() => undefined),
    pin: () => {
      this.pins++;
      return () => this.pins--;
    },
  };

  adopt(adopted: Omit<AdoptedBox, 'box'>): void {
    this.emitAdopted({ box: this.theBox, ...adopted });
  }

  box(): Promise<StatefulBox> {
    return Promise.resolve(this.theBox);
  }

  existing(): StatefulBox | undefined {
    return this.theBox;
  }

  discard(): Promise<void> {
    return Promise.resolve();
  }
}

const job: CellJob = {
  actionId: 'act_1',
  sessionId: 'ses_1',
  language: 'python',
  code: 'x + 1',
  env: {},
  baseEnv: {},
  timeoutMs: 5000,
  tier: 'pooled',
  tierExplicit: false,
  workspaceDir: '/workspace',
  output: { maxBytes: 1024, maxLines: 100 },
};

describe('kernels and processes of an adopted box', () => {
  const setup = () => {
    const host = new AdoptingHost();
    const kernels = new SessionKernels(
      [host],
      {
        idleMs: 60_000,
        interruptGraceMs: 100,
        runnerGraceMs: 1000,
        results: { maxBytes: 1, cellMaxBytes: 1 },
      },
      systemClock,
    );
    const processes = new SessionProcesses(
      [host],
      {
        maxPerSession: 2,
        maxPerSessionSetting: 'SWITCHYARD_MAX_PROCESSES',
        logBytes: 1024,
        redact: [/s3cret/g],
      },
      systemClock,
    );
    host.adopt({
      kernels: [
        {
          id: KERNEL,
          language: 'python',
          pid: 50,
          executionCount: 2,
          record: { startedAt: '2026-01-01T00:00:00.000Z', workspaceDir: '/workspace', baseEnv: { A: '1' } },
        },
        // Not one of the engine's: never registered.
        { id: 'evil', language: 'python', pid: 1, executionCount: 0, record: null },
      ],
      processes: [{ id: PROC, pid: 60, record: { name: 'web', command: 'python3 -m http.server' } }],
    });
    return { host, kernels, processes };
  };

  it('are listed again under their ids, and a cell runs in the adopted kernel', async () => {
    const { host, kernels } = setup();
    expect(kernels.list('ses_1')).toEqual([
      expect.objectContaining({
        id: KERNEL,
        language: 'python',
        tier: 'pooled',
        executionCount: 2,
        pid: 50,
        startedAt: '2026-01-01T00:00:00.000Z',
      }),
    ]);
    const result = await kernels.runCell(job);
    expect(host.wire.cells).toEqual([expect.objectContaining({ kernel: KERNEL, code: 'x + 1' })]);
    expect(result.kernel).toMatchObject({ id: KERNEL, started: false, executionCount: 3 });
    expect(result.result).toBe('42');
    kernels.close();
  });

  it('processes are listed running, their output logged (redacted) and their exit heard', async () => {
    const { host, processes } = setup();
    expect(processes.list('ses_1')).toEqual([
      expect.objectContaining({
        id: PROC,
        name: 'web',
        command: 'python3 -m http.server',
        running: true,
        pid: 60,
      }),
    ]);
    // They count against the limit, and hold their names.
    expect(() => processes.checkStart('ses_1', 'web')).toThrow(/already running/);
    host.wire.emit({ ev: 'pout', proc: PROC, fd: 1, data: Buffer.from('GET / s3cret\n') });
    expect(processes.logs('ses_1', 'web').entries.map((e) => e.text)).toEqual(['GET / ***REDACTED***\n']);
    host.wire.emit({ ev: 'pexit', proc: PROC, exitCode: 0, signal: null });
    expect(processes.get('ses_1', PROC)).toMatchObject({ running: false, exitCode: 0 });
  });

  it('pin the box while they live', () => {
    const { host, kernels, processes } = setup();
    expect(host.pins).toBe(2);
    kernels.close();
    processes.close();
    expect(host.pins).toBe(0);
  });
});
