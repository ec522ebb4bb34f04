/**
 * SessionPods' workspace snapshots: walked by the session pod's runner (`snapshot`), and the one after a tier run
 * taken by the runner as the run ended and sent with its exit. And the calls of a run that holds the pod: served
 * beside it, nested in it, while everything else waits. The runner is stood in for on the other end of a
 * real `RunnerConnection`, answering as runner.py does; what is checked is which request goes out and which answer
 * comes back.
 */
import { Logger } from '@nestjs/common';
import { PassThrough } from 'node:stream';
import { FakeClock } from '../../../test/fake-clock';
import { RUNNER_EXIT_OK } from '../../../test/runner-exit';
import { asCallOf } from '../../core/call-scope';
import { RunnerConnection } from '../../core/runner/runner-connection';
import { resolveSandboxOptions } from '../../core/sandbox.options';
import type { TierJob } from '../../core/sandbox.types';
import { FakeKubeClient } from './fake-kube-client.testing';
import { resolveKubernetesOptions } from './kubernetes.options';
import type { PodLauncher } from './pod-launcher';
import { PodRunner } from './pod-runner';
import { PodChannels } from './pod-channels';
import { PodRuns } from './pod-runs';
import type { RunnerRecovery } from './runner-recovery';
import { SessionPods } from './session-pods';

const BOUNDS = { maxEntries: 10_000, maxScanEntries: 100_000 };
const walkedBy = (who: string) => ({ ok: true, snapshot: { entries: [[who, '1:2:3']], partial: false } });

/**
 * A session pod whose runner is this test: it answers runs (with the snapshot when asked) and `snapshot`s; a run of
 * the code `hold` only once `release` is called.
 */
function cluster(options: { maxSessions?: number } = {}) {
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  const toRunner = new PassThrough();
  const fromRunner = new PassThrough();
  const sent: Array<Record<string, unknown>> = [];
  let runs = 0;
  let buffered = '';
  const reply = (m: Record<string, unknown>) => fromRunner.write(`${JSON.stringify(m)}\n`);
  toRunner.on('data', (chunk: Buffer) => {
    buffered += chunk.toString('utf8');
    const lines = buffered.split('\n');
    buffered = lines.pop()!;
    for (const line of lines) {
      const m = JSON.parse(line) as Record<string, unknown>;
      sent.push(m);
      if (m.op === 'run') {
        const n = ++runs;
        void (m.code === 'hold' ? released : Promise.resolve()).then(() =>
          reply({
            ...RUNNER_EXIT_OK,
            ev: 'exit',
            id: m.id,
            ...(m.snapshot ? { snapshot: walkedBy(`run-${n}`) } : {}),
          }),
        );
      } else if (m.op === 'snapshot') reply({ ev: 'snapshot', id: m.id, ...walkedBy('op') });
    }
  });
  const connection = new RunnerConnection({
    stdin: toRunner,
    stdout: fromRunner,
    closed: new Promise<void>(() => undefined),
    close: () => undefined,
  });
  const runner = new PodRunner('sy-s-1', connection, undefined, false, ['2049', '77'], undefined, () => '');
  const launcher = {
    launch: () => Promise.resolve({ info: { name: 'sy-s-1', uid: 'uid-1' }, runner }),
    remove: () => Promise.resolve(),
    inFlight: new Set(),
  } as unknown as PodLauncher;
  const clock = new FakeClock(1);
  const podRuns = new PodRuns(clock, 1000, new PodChannels(new Logger('test')));
  const sessions = new SessionPods(
    new FakeKubeClient(),
    resolveKubernetesOptions({ image: 'switchyard/sandbox:t1', namespace: 'fake-ns', ...options }),
    launcher,
    undefined,
    {} as RunnerRecovery,
    podRuns,
    clock,
    new Logger('test'),
  );
  const job: TierJob = {
    actionId: 'act_1',
    sessionId: 's1',
    language: 'python',
    code: 'print(1)',
    env: {},
    timeoutMs: 5000,
    workspaceDir: '/unused',
    output: resolveSandboxOptions({}).output,
  };
  /** A fresh run as `KubernetesPooledTier.run` makes it. */
  const tierRun = async () => {
    const pod = await sessions.podFor('s1');
    const limits = { memoryBytes: 2 ** 29, fileSizeBytes: 2 ** 30, memoryWords: 'the pod’s limit' };
    return sessions.serialise(pod, () => podRuns.run(sessions.target(pod), job, limits, undefined, 0));
  };
  const ops = (op: string) => sent.filter((m) => m.op === op);
  return { sessions, sent, tierRun, ops, job, podRuns, release };
}

describe('SessionPods: workspace snapshots', () => {
  it('asks the runner to walk the workspace, naming the session’s workspace', async () => {
    const { sessions, ops } = cluster();
    await expect(sessions.snapshot('s1', BOUNDS, 5000)).resolves.toEqual(walkedBy('op'));
    expect(ops('snapshot')).toEqual([{ op: 'snapshot', id: 1, ...BOUNDS, workspace: ['2049', '77'] }]);
  });

  it('without walkAfterRuns, a run asks for no snapshot and the one after it is a request', async () => {
    const { sessions, tierRun, ops } = cluster();
    await tierRun();
    expect(ops('run')[0]).not.toHaveProperty('snapshot');
    await expect(sessions.snapshot('s1', BOUNDS, 5000, { afterRun: true })).resolves.toEqual(walkedBy('op'));
  });

  it('the snapshot after a run is the one the runner sent with its exit, once, when nothing ran since', async () => {
    const { sessions, tierRun, ops } = cluster();
    sessions.walkAfterRuns(BOUNDS);
    await sessions.snapshot('s1', BOUNDS, 5000); // the code action's "before"
    await tierRun();
    expect(ops('run')[0]).toMatchObject({ snapshot: BOUNDS });
    await expect(sessions.snapshot('s1', BOUNDS, 5000, { afterRun: true })).resolves.toEqual(
      walkedBy('run-1'),
    );
    expect(ops('snapshot')).toHaveLength(1); // no request for it
    // Taken once: asked again, the runner walks.
    await expect(sessions.snapshot('s1', BOUNDS, 5000, { afterRun: true })).resolves.toEqual(walkedBy('op'));
    expect(ops('snapshot')).toHaveLength(2);
  });

  it('walks again when something ran in the pod since the run, for another bound, or for a "before"', async () => {
    const { sessions, tierRun, ops } = cluster();
    sessions.walkAfterRuns(BOUNDS);
    await tierRun();
    await sessions.runInPod('s1', { language: 'bash', code: 'touch x', timeoutMs: 1000, capBytes: 100 });
    await expect(sessions.snapshot('s1', BOUNDS, 5000, { afterRun: true })).resolves.toEqual(walkedBy('op'));

    await tierRun();
    const other = { maxEntries: 5, maxScanEntries: 100_000 };
    await expect(sessions.snapshot('s1', other, 5000, { afterRun: true })).resolves.toEqual(walkedBy('op'));

    await tierRun();
    await expect(sessions.snapshot('s1', BOUNDS, 5000)).resolves.toEqual(walkedBy('op'));
    // …which also drops it: the next "after" is walked too.
    await expect(sessions.snapshot('s1', BOUNDS, 5000, { afterRun: true })).resolves.toEqual(walkedBy('op'));
    expect(ops('snapshot')).toHaveLength(4);
  });
});

describe('SessionPods: the calls of a run that holds the pod', () => {
  const raw = { language: 'bash' as const, code: 'touch x', timeoutMs: 1000, capBytes: 100 };
  const tick = () => new Promise((resolve) => setImmediate(resolve));

  it('serves the holding action’s calls at once, nested in its run; everything else waits for the run', async () => {
    const { sessions, ops, job, podRuns, release } = cluster();
    sessions.walkAfterRuns(BOUNDS);
    const pod = await sessions.podFor('s1');
    const limits = { memoryBytes: 2 ** 29, fileSizeBytes: 2 ** 30, memoryWords: 'the pod’s limit' };
    // A skill's body: a run that holds the pod, as `KubernetesPooledTier.run` makes it for a job with a channel.
    const skill = sessions.withPod(pod, (target) =>
      sessions.holding(pod, 'act_skill', target, () =>
        podRuns.run(target, { ...job, actionId: 'act_skill', code: 'hold' }, limits, undefined, 0),
      ),
    );
    await tick();
    const outside = sessions.runInPod('s1', raw);
    const otherCaller = asCallOf('act_other', () => sessions.runInPod('s1', raw));
    // The skill's own call (a file tool), and its nested code action's snapshot: beside the run.
    await asCallOf('act_skill', () => sessions.runInPod('s1', raw));
    await asCallOf('act_skill', () => sessions.snapshot('s1', BOUNDS, 5000, { afterRun: true }));
    expect(ops('run')).toHaveLength(2);
    expect(ops('run')[0]).toMatchObject({ code: 'hold', snapshot: BOUNDS });
    expect(ops('run')[0]).not.toHaveProperty('nested');
    expect(ops('run')[1]).toMatchObject({ code: 'touch x', nested: true, workspace: ['2049', '77'] });
    expect(ops('run')[1]).not.toHaveProperty('snapshot');
    expect(ops('snapshot')).toHaveLength(1);

    release();
    await skill;
    await Promise.all([outside, otherCaller]);
    // Once the skill's run ended: the others, each a fresh run of its own (not nested), and no hold is left.
    expect(ops('run').slice(2)).toEqual([
      expect.not.objectContaining({ nested: true }),
      expect.not.objectContaining({ nested: true }),
    ]);
    expect(sessions.holdCount(pod)).toBe(0);
    await asCallOf('act_skill', () => sessions.runInPod('s1', raw));
    expect(ops('run')[4]).not.toHaveProperty('nested');
  });
});

describe('SessionPods: maxSessions', () => {
  it('a session that ended stops counting against it before its pod is deleted', async () => {
    const { sessions } = cluster({ maxSessions: 1 });
    await sessions.podFor('s1');
    await expect(sessions.podFor('s2')).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
    // Fenced (the engine's DELETE answered), its pod not deleted yet: s2 gets one; s3 is still refused.
    sessions.fence('s1');
    sessions.fence('unknown');
    expect(sessions.current('s1')).toBeDefined();
    await expect(sessions.podFor('s2')).resolves.toMatchObject({ sessionId: 's2' });
    await expect(sessions.podFor('s3')).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
    await sessions.release('s1');
    expect(sessions.current('s1')).toBeUndefined();
    await expect(sessions.podFor('s3')).rejects.toMatchObject({ code: 'POOL_SESSIONS_EXHAUSTED' });
  });
});
