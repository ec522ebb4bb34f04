import { PassThrough } from 'node:stream';
import { InvalidInputError } from '@switchyard/common';
import { type RunnerConnection } from '../runner/runner-connection';
import { RunnerRefusedError } from '../runner/runner.errors';
import { parsePortRanges, resolvePortsOptions } from './ports.options';
import { PortClosedError, PortsDisabledError, SessionPorts } from './session-ports';
import { type StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type { StatefulTier } from './stateful.types';

/** A runner whose sandbox listens on `listening` (port → owner process), recording what it was asked. */
class FakeRunner {
  readonly opened: number[] = [];
  gone = false;

  constructor(readonly listening: Map<number, string | null>) {}

  openTunnel(port: number): Promise<PassThrough & { proc: string | null; kernel: null }> {
    this.opened.push(port);
    if (this.gone) return Promise.reject(new Error('the runner connection closed'));
    if (!this.listening.has(port)) {
      return Promise.reject(
        new RunnerRefusedError(`runner refused: 127.0.0.1:${port}: ECONNREFUSED`, 'connect'),
      );
    }
    return Promise.resolve(
      Object.assign(new PassThrough(), { proc: this.listening.get(port)!, kernel: null }),
    );
  }

  listPorts(): Promise<Array<{ port: number; address: string; proc: string | null; kernel: null }>> {
    if (this.gone) return Promise.reject(new Error('gone'));
    return Promise.resolve(
      [...this.listening].map(([port, proc]) => ({ port, address: '127.0.0.1', proc, kernel: null })),
    );
  }
}

/** A host whose sessions' boxes exist or not as the test says; counts pins. */
class FakeHost extends StatefulBoxHost {
  readonly memoryBytes = 1 << 30;
  readonly boxes = new Map<string, StatefulBox>();
  pins = 0;
  opened = 0;

  constructor(readonly tier: StatefulTier) {
    super();
  }

  add(sessionId: string, runner: FakeRunner): void {
    this.boxes.set(sessionId, {
      tier: this.tier,
      sessionId,
      connection: runner as unknown as RunnerConnection,
      workspace: ['1', '2'],
      interpreters: {},
      closed: new Promise<void>(() => undefined),
      pin: () => {
        this.pins++;
        return () => this.pins--;
      },
    });
  }

  box(): Promise<StatefulBox> {
    this.opened++;
    return Promise.reject(new Error('SessionPorts must never open a box'));
  }

  existing(sessionId: string): StatefulBox | undefined {
    return this.boxes.get(sessionId);
  }

  discard(): Promise<void> {
    return Promise.resolve();
  }
}

describe('SessionPorts', () => {
  const setup = (live: StatefulTier[] = [], options = {}) => {
    const pooled = new FakeHost('pooled');
    const subprocess = new FakeHost('subprocess');
    const ports = new SessionPorts([subprocess, pooled], () => live, resolvePortsOptions(options));
    return { pooled, subprocess, ports };
  };

  it('connects through the box holding the session’s running state, and pins it while the stream is open', async () => {
    const { pooled, subprocess, ports } = setup(['subprocess']);
    const inPooled = new FakeRunner(new Map([[8000, 'prc_pooled']]));
    const inSubprocess = new FakeRunner(new Map([[8000, 'prc_sub']]));
    pooled.add('ses_1', inPooled);
    subprocess.add('ses_1', inSubprocess);
    const c = await ports.connect('ses_1', 8000);
    expect([c.tier, c.proc, c.kernel]).toEqual(['subprocess', 'prc_sub', null]);
    expect(inPooled.opened).toEqual([]);
    expect(subprocess.pins).toBe(1);
    c.stream.destroy();
    await new Promise((resolve) => setImmediate(resolve));
    expect(subprocess.pins).toBe(0);
    expect(pooled.opened + subprocess.opened).toBe(0);
  });

  it('without running state, tries the strongest box first, then the next one when nothing listens there', async () => {
    const { pooled, subprocess, ports } = setup();
    const inPooled = new FakeRunner(new Map());
    pooled.add('ses_1', inPooled);
    subprocess.add('ses_1', new FakeRunner(new Map([[3000, null]])));
    const c = await ports.connect('ses_1', 3000);
    expect(c.tier).toBe('subprocess');
    expect(inPooled.opened).toEqual([3000]);
  });

  it('is PORT_CLOSED when the session has no box, or no box has anything listening (a gone runner included)', async () => {
    const { pooled, subprocess, ports } = setup(['pooled']);
    await expect(ports.connect('ses_1', 3000)).rejects.toThrow(/has no sandbox running/);
    const gone = new FakeRunner(new Map([[3000, null]]));
    gone.gone = true;
    pooled.add('ses_1', gone);
    subprocess.add('ses_1', new FakeRunner(new Map()));
    const err = await ports.connect('ses_1', 3000).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(PortClosedError);
    expect(err).toMatchObject({ code: 'PORT_CLOSED', kind: 'bad_gateway', details: { port: 3000 } });
    expect((err as Error).message).toMatch(
      /pooled: the sandbox's runner did not answer.*subprocess: 127.0.0.1:3000: ECONNREFUSED/,
    );
  });

  it('refuses a port outside the allowed ranges or not a port (naming `port`), and every port when disabled', async () => {
    const { ports } = setup([], {
      allowed: parsePortRanges('3000,8000-8999'),
      settingNames: { allowed: 'X_ALLOWED' },
    });
    for (const port of [0, 22, 2999, 9000, 65536, 1.5]) {
      const err = await ports.connect('ses_1', port).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidInputError);
      expect((err as InvalidInputError).field).toBe('port');
    }
    await expect(ports.connect('ses_1', 9000)).rejects.toThrow(
      'the allowed ports are 3000,8000-8999 (X_ALLOWED)',
    );
    const off = setup([], { enabled: false }).ports;
    await expect(off.connect('ses_1', 3000)).rejects.toBeInstanceOf(PortsDisabledError);
  });

  it('lists what listens in every box of the session, by port, with its tier and owner', async () => {
    const { pooled, subprocess, ports } = setup();
    expect(await ports.list('ses_1')).toEqual([]);
    pooled.add(
      'ses_1',
      new FakeRunner(
        new Map([
          [8000, 'prc_a'],
          [5000, null],
        ]),
      ),
    );
    const gone = new FakeRunner(new Map([[1, null]]));
    gone.gone = true;
    subprocess.add('ses_1', gone);
    expect(await ports.list('ses_1')).toEqual([
      { port: 5000, address: '127.0.0.1', tier: 'pooled', proc: null, kernel: null },
      { port: 8000, address: '127.0.0.1', tier: 'pooled', proc: 'prc_a', kernel: null },
    ]);
  });
});

describe('parsePortRanges', () => {
  it('reads ports and ranges, and names the first bad entry', () => {
    expect(parsePortRanges(' 3000 , 8000-8999,')).toEqual([
      [3000, 3000],
      [8000, 8999],
    ]);
    expect(() => parsePortRanges('80-70')).toThrow('"80-70" ends before it starts');
    expect(() => parsePortRanges('0-10')).toThrow('outside 1-65535');
    expect(() => parsePortRanges('http')).toThrow('"http" is not a port');
  });
});
