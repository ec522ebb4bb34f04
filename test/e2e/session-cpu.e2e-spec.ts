import { existsSync, readFileSync } from 'node:fs';
import * as path from 'node:path';
import { cgroupDirOf } from '../../libs/sandbox/src/backends/subprocess/cgroup-mounts';
import { EngineHarness } from '../support/engine-harness';
import { eventually, mountDevice, sandboxedProcessesOf } from '../support/host-probes';

/**
 * Fair CPU per session in the subprocess tier: the concurrent actions of one session, and its background processes,
 * run in cgroups under one session cgroup whose CPU quota is the session's (SWITCHYARD_SUBPROCESS_SESSION_CPUS),
 * each action's own group holding the per-action cap (SWITCHYARD_SUBPROCESS_CPUS); deleting the session removes it.
 * The structure is asserted, not timings (bench/bystander.ts measures what it does to a bystander). The two quotas
 * differ here so that each can be told from the other.
 */
const SESSION_CPUS = 1.5;
const ACTION_CPUS = 0.5;
const BUSY = 8;

/** The cgroup directory holding `pid`'s CPU limit: the cpu hierarchy on cgroup v1, the unified one on v2. */
const cpuDirOf = (pid: number): string | undefined => cgroupDirOf(pid, 'cpu') ?? cgroupDirOf(pid, '');

/** A directory's CFS quota in CPUs (`max`: unlimited). */
function quotaOf(dir: string): number | 'max' {
  if (existsSync(`${dir}/cpu.max`)) {
    const [quota, period] = readFileSync(`${dir}/cpu.max`, 'utf8').trim().split(/\s+/);
    return quota === 'max' ? 'max' : Number(quota) / Number(period);
  }
  const quota = Number(readFileSync(`${dir}/cpu.cfs_quota_us`, 'utf8'));
  return quota < 0 ? 'max' : quota / Number(readFileSync(`${dir}/cpu.cfs_period_us`, 'utf8'));
}

describe('subprocess tier: one CPU quota per session', () => {
  let engine: EngineHarness;

  beforeAll(async () => {
    engine = await EngineHarness.start({
      // The busy loops would be routed to a container tier; here they must land in the subprocess tier.
      SWITCHYARD_RISK_DISABLED_RULES: 'unbounded-loop',
      SWITCHYARD_SUBPROCESS_SESSION_CPUS: String(SESSION_CPUS),
      SWITCHYARD_SUBPROCESS_CPUS: String(ACTION_CPUS),
    });
  });
  afterAll(() => engine.stop());

  it('puts eight concurrent busy actions and a background process of a session under one session cgroup with the session quota, and removes it with the session', async () => {
    const sid = await engine.createSession({ maxConcurrentActions: BUSY + 1 });
    const other = await engine.createSession();
    const devices = new Map([sid, other].map((s) => [s, mountDevice(engine.workspaceOf(s))]));
    const busy = async (session: string): Promise<string> => {
      const res = await engine.request('POST', `/v1/sessions/${session}/actions`, {
        type: 'code',
        language: 'python',
        code: 'while True:\n    pass',
        timeoutMs: 60_000,
        wait: false,
      });
      expect(res.status).toBeLessThan(300);
      return res.body.id as string;
    };
    const ids: string[] = [];
    for (let i = 0; i < BUSY; i++) ids.push(await busy(sid));
    const bystanderId = await busy(other);

    const pidsOf = (session: string, command: RegExp): number[] =>
      sandboxedProcessesOf(session, devices.get(session))
        .filter((line) => command.test(line.slice(line.indexOf(':') + 2)))
        .map((line) => Number(line.split(':')[0]));
    // The code runs as `python -c <bootstrap>` (its bubblewrap names it only further along its own command line).
    const CODE = /^\S*python\S* -c /;
    const SLEEP = /^sleep 4913 /;
    const loops = () => pidsOf(sid, CODE);
    expect(await eventually(() => loops().length === BUSY, 15_000)).toBe(true);
    // Then a background process (once the loops run: a fresh action of a session whose subprocess-tier box holds a
    // running process runs in that box, one at a time).
    const started = await engine.action(sid, {
      type: 'process',
      op: 'start',
      command: 'exec sleep 4913',
      tier: 'subprocess',
    });
    expect(started).toMatchObject({ status: 'succeeded', tier: 'subprocess' });
    expect(await eventually(() => pidsOf(sid, SLEEP).length === 1, 15_000)).toBe(true);
    expect(await eventually(() => pidsOf(other, CODE).length === 1, 15_000)).toBe(true);
    for (const id of ids) {
      expect((await engine.request('GET', `/v1/sessions/${sid}/actions/${id}`)).body.status).toBe('running');
    }

    const actionDirs = loops().map(cpuDirOf);
    expect(actionDirs.every((d) => d !== undefined)).toBe(true);
    // Eight groups, one per action, all in one session group under the engine's switchyard/ parent.
    expect(new Set(actionDirs).size).toBe(BUSY);
    const sessionDirs = new Set(actionDirs.map((d) => path.dirname(d!)));
    expect(sessionDirs.size).toBe(1);
    const sessionDir = [...sessionDirs][0];
    expect(path.basename(path.dirname(sessionDir))).toBe('switchyard');
    expect(path.basename(sessionDir)).toMatch(/^e\d+-\d+-[0-9a-f]+$/);
    expect(quotaOf(sessionDir)).toBeCloseTo(SESSION_CPUS, 5);
    for (const dir of actionDirs) expect(quotaOf(dir!)).toBeCloseTo(ACTION_CPUS, 5);
    // The session's background process (its stateful sandbox) shares the session group.
    const sleeper = cpuDirOf(pidsOf(sid, SLEEP)[0])!;
    expect(path.dirname(sleeper)).toBe(sessionDir);
    // Another session's action is in a session group of its own.
    const otherDir = cpuDirOf(pidsOf(other, CODE)[0])!;
    expect(path.dirname(otherDir)).not.toBe(sessionDir);
    expect(path.basename(path.dirname(path.dirname(otherDir)))).toBe('switchyard');

    const deleted = await engine.request('DELETE', `/v1/sessions/${sid}`);
    expect(deleted.status).toBeLessThan(300);
    expect(await eventually(() => !existsSync(sessionDir), 10_000)).toBe(true);
    expect(loops()).toEqual([]);
    await engine.request('POST', `/v1/sessions/${other}/actions/${bystanderId}/cancel`);
  }, 120_000);
});
