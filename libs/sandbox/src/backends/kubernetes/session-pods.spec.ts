/**
 * SessionPods' workspace snapshots: walked by the session pod's runner (`snapshot`), and the one after a tier run
 * taken by the runner as the run ended and sent with its exit. The runner is stood in for on the other end of a
 * real `RunnerConnection`, answering as runner.py does; what is checked is which request goes out and which answer
 * comes back.
 */
import { Logger } from '@nestjs/common';
import { PassThrough } from 'node:stream';
import { FakeClock } from '../../../test/fake-clock';
import { RUNNER_EXIT_OK } from '../../../test/runner-exit';
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

/** A session pod whose runner is this test: it answers runs (with the snapshot when asked) and `snapshot`s. */
function cluster() {
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
        runs++;
        reply({
          ...RUNNER_EXIT_OK,
          ev: 'exit',
          id: m.id,
          ...(m.snapshot ? { snapshot: walkedBy(`run-${runs}`) } : {}),
        });
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
    resolveKubernetesOptions({ image: 'switchyard/sandbox:t1', namespace: 'fake-ns' }),
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
  return { sessions, sent, tierRun, ops };
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
