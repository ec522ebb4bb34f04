import { processStartTicks } from '../../core/engine-instance';
import {
  cgroupName,
  ENGINE_MARK_ENV,
  engineGone,
  engineOfCgroup,
  formatEngineMark,
  ownEngineMark,
  parseEngineMark,
} from './engine-mark';
import { type ProcessTable, reapOrphanedSandboxes } from './orphan-reaper';

/** A process table: pid → environment (as /proc shows it) and start ticks. Records kills. */
class FakeTable implements ProcessTable {
  readonly killed: number[] = [];
  constructor(private readonly procs: Map<number, { env?: string[]; ticks: string }>) {}
  pidNamespace(): string {
    return '4026531836';
  }
  pids(): number[] {
    return [...this.procs.keys()];
  }
  environ(pid: number): string | undefined {
    const env = this.procs.get(pid)?.env;
    return env && env.map((e) => `${e}\0`).join('');
  }
  startTicks(pid: number): string | undefined {
    return this.procs.get(pid)?.ticks;
  }
  kill(pid: number): void {
    this.killed.push(pid);
  }
}

describe('engine marks', () => {
  it('names this engine by pid and start time, in the environment (with its pid namespace) and in cgroup names', () => {
    const mark = ownEngineMark();
    const ticks = processStartTicks(process.pid);
    expect(mark).toEqual({ pid: process.pid, ticks, ns: expect.stringMatching(/^\d+$/) });
    expect(parseEngineMark(formatEngineMark())).toEqual(mark);
    expect(engineOfCgroup(cgroupName())).toEqual({ pid: process.pid, ticks });
    expect(engineOfCgroup(cgroupName('probe'))).toEqual({ pid: process.pid, ticks });
    expect(engineGone(mark)).toBe(false);
  });

  it('reads earlier cgroup names (pid only) and nothing else', () => {
    expect(engineOfCgroup('e42-0123456789ab')).toEqual({ pid: 42, ticks: undefined });
    expect(engineOfCgroup('e42-123456789012')).toEqual({ pid: 42, ticks: undefined });
    expect(engineOfCgroup('e42-0-abc')).toEqual({ pid: 42, ticks: undefined });
    for (const name of ['docker', 'e42', 'x42-1-a', 'e42-1-a-b'])
      expect(engineOfCgroup(name)).toBeUndefined();
    for (const value of ['', '42', '42:1', 'a:1:2', '42:1:2:3'])
      expect(parseEngineMark(value)).toBeUndefined();
  });

  it('counts an engine gone only when its pid is free or belongs to a later process', () => {
    const ticks = (t?: string) => () => t;
    expect(engineGone({ pid: 7, ticks: '100' }, ticks(undefined))).toBe(true);
    expect(engineGone({ pid: 7, ticks: '100' }, ticks('200'))).toBe(true);
    expect(engineGone({ pid: 7, ticks: '100' }, ticks('100'))).toBe(false);
    // Without ticks the pid alone decides, on the side of leaving things alone.
    expect(engineGone({ pid: 7 }, ticks('200'))).toBe(false);
    expect(engineGone({ pid: 7 }, ticks(undefined))).toBe(true);
  });
});

describe('reapOrphanedSandboxes', () => {
  it('kills marked processes of dead engines only', () => {
    const mark = (pid: number, ticks: string, ns = '4026531836') =>
      `${ENGINE_MARK_ENV}=${pid}:${ticks}:${ns}`;
    const table = new FakeTable(
      new Map([
        [10, { ticks: '1000' }], // a running engine
        [11, { env: [mark(10, '1000')], ticks: '1001' }], // its launcher
        [20, { env: ['A=1', mark(99, '5')], ticks: '900' }], // launcher of engine 99, gone
        [21, { env: [mark(99, '5')], ticks: '901' }], // that launcher's sandbox init
        [30, { env: [mark(10, '77')], ticks: '902' }], // engine pid 10 reused: launcher of an older engine
        [40, { env: ['PATH=/bin'], ticks: '903' }], // unmarked
        [41, { ticks: '904' }], // environment unreadable
        [50, { env: [`${ENGINE_MARK_ENV}=junk`], ticks: '905' }], // not a mark
        [60, { env: [mark(99, '5', '4026532999')], ticks: '906' }], // an engine in a container: its pid is not ours
      ]),
    );
    expect(reapOrphanedSandboxes(table)).toEqual([20, 21, 30]);
    expect(table.killed).toEqual([20, 21, 30]);
  });

  it('never kills the engine itself', () => {
    const table = new FakeTable(
      new Map([[process.pid, { env: [`${ENGINE_MARK_ENV}=1:1:4026531836`], ticks: '1' }]]),
    );
    expect(reapOrphanedSandboxes(table)).toEqual([]);
  });
});
