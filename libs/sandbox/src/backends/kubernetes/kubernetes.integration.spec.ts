/**
 * The Kubernetes tiers against a real cluster: `bash scripts/k8s.sh start` (a single node on loopback, no scheduler,
 * the sandbox image imported). The kubeconfig comes from `$KUBECONFIG`, else `.runtime/k8s/kubeconfig`. A missing or
 * unreachable cluster fails the suite: it never skips.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { Logger } from '@nestjs/common';
import type { Language } from '@switchyard/common';
import { TEST_IMAGE_SOURCE } from '../../../test/sandbox-image';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import type { TierJob, TierRunResult } from '../../core/sandbox.types';
import type { StatefulBox } from '../../core/stateful/stateful-box.port';
import { ClientNodeKubeClient } from './client-node-kube-client';
import type { PodInfo } from './kube-types';
import { K8S_LABELS, NETWORK_POLICY_NAME, RUNNER_CONTAINER } from './kubernetes.constants';
import { resolveKubernetesOptions, type KubernetesOptions } from './kubernetes.options';
import { KubernetesSandbox } from './kubernetes-sandbox';
import { KubernetesOneOffTier, KubernetesPooledTier } from './kubernetes-tiers';
import { engineSelector, sessionPodManifest } from './pod-spec';

const REPO = path.resolve(__dirname, '../../../../..');
const KUBECONFIG = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
const NAMESPACE = 'switchyard-test';
const MiB = 2 ** 20;
/** A pid no process has (above the kernel's pid_max). */
const DEAD_PID = 4_194_305;

if (!fs.existsSync(KUBECONFIG)) {
  throw new Error(
    `no kubeconfig at ${KUBECONFIG}: start the test cluster with \`bash scripts/k8s.sh start\``,
  );
}
const base = resolveKubernetesOptions({ ...TEST_IMAGE_SOURCE, kubeconfigPath: KUBECONFIG });
if (!base.image) throw new Error('no sandbox image tag: run `npx node scripts/sandbox-image.mjs`');
const IMAGE = base.image;

const kc = new k8s.KubeConfig();
kc.loadFromFile(KUBECONFIG);
const core = kc.makeApiClient(k8s.CoreV1Api);
/** The test cluster's node (it has no scheduler: pods name it), read in `beforeAll`. */
let NODE = '';

Logger.overrideLogger(['error', 'warn']);

function options(extra: KubernetesOptions = {}) {
  return resolveKubernetesOptions({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    image: IMAGE,
    nodeName: NODE,
    min: 1,
    // One warm pod whatever the claims (the target never rises past max): the race below races for exactly one.
    max: 1,
    acquireTimeoutMs: 60_000,
    healthCheckTimeoutMs: 5000,
    runnerGraceMs: 5000,
    limits: {
      pooled: { cpus: 0.25, memoryBytes: 160 * MiB, tmpBytes: 16 * MiB, workspaceBytes: 64 * MiB },
      container: { cpus: 0.25, memoryBytes: 160 * MiB, tmpBytes: 16 * MiB, workspaceBytes: 64 * MiB },
    },
    ...extra,
  });
}

function engine(extra: KubernetesOptions = {}): KubernetesSandbox {
  const o = options(extra);
  const client = new ClientNodeKubeClient({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    apiTimeoutMs: o.apiTimeoutMs,
    execTimeoutMs: o.execTimeoutMs,
  });
  return new KubernetesSandbox(o, client);
}

let n = 0;
function job(sessionId: string, language: Language, code: string, extra: Partial<TierJob> = {}): TierJob {
  return {
    actionId: `act_${++n}`,
    sessionId,
    language,
    code,
    env: { PATH: '/usr/local/bin:/usr/bin:/bin', LANG: 'C.UTF-8', HOME: '/tmp' },
    timeoutMs: 10_000,
    workspaceDir: '/not/used/on/kubernetes',
    output: { maxBytes: 64 * 1024, maxLines: 1000 },
    ...extra,
  };
}

async function eventually(check: () => Promise<boolean>, withinMs: number): Promise<boolean> {
  const deadline = Date.now() + withinMs;
  for (;;) {
    if (await check()) return true;
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 200));
  }
}

/** Pods of an engine still there (and not on their way out). */
async function podsOf(sb: KubernetesSandbox): Promise<PodInfo[]> {
  return (await sb.client.listPods(engineSelector(sb.options.engineId))).filter((p) => !p.deleting);
}

let A: KubernetesSandbox;
let pooled: KubernetesPooledTier;
let oneOff: KubernetesOneOffTier;
const S = 'ses_k8s_main';
let kernelBox: StatefulBox | undefined;

beforeAll(async () => {
  const { body } = await core.listNode().catch((err: Error) => {
    throw new Error(`the test cluster does not answer (${err.message}): run \`bash scripts/k8s.sh start\``);
  });
  NODE = body.items[0]?.metadata?.name ?? '';
  if (!NODE) throw new Error('the test cluster has no node');
  A = engine();
  pooled = new KubernetesPooledTier(A);
  oneOff = new KubernetesOneOffTier(A);
}, 30_000);

afterAll(async () => {
  await A?.onApplicationShutdown();
}, 60_000);

describe('Kubernetes tiers on a real cluster', () => {
  beforeAll(async () => {
    const availability = await A.availability();
    if (!availability.available) {
      throw new Error(
        `the test cluster is not usable (${availability.reason}): run \`bash scripts/k8s.sh start\``,
      );
    }
    await A.start();
    expect(await eventually(async () => (A.warm?.stats().warm ?? 0) >= 1, 60_000)).toBe(true);
  }, 90_000);

  it('claims a warm session pod and runs python, node and bash in it, with exit codes and output', async () => {
    const py = await pooled.run(
      job(S, 'python', 'import sys\nprint("py", 6*7)\nprint("err", file=sys.stderr)\nsys.exit(3)'),
    );
    expect(A.stats().warm?.warmClaims).toBe(1);
    expect(py).toMatchObject({ exitCode: 3, stdout: 'py 42\n', stderr: 'err\n', timedOut: false });
    expect(py.containerId).toMatch(/^sy-s-/);
    const node = await pooled.run(job(S, 'node', 'console.log(1 + 1); process.exit(4)'));
    expect(node).toMatchObject({ exitCode: 4, stdout: '2\n' });
    const bash = await pooled.run(
      job(S, 'bash', 'echo "$((6*7))"; read -r x; echo "got $x"; exit 5', { stdin: 'hi\n' }),
    );
    expect(bash).toMatchObject({ exitCode: 5, stdout: '42\ngot hi\n' });
    expect(node.containerId).toBe(py.containerId);
    const [info] = A.sessions.list();
    expect(info).toMatchObject({ sessionId: S, warm: true, alive: true });
  });

  it('keeps files between runs and kills what a run leaves behind', async () => {
    await pooled.run(
      job(
        S,
        'bash',
        'echo hello > kept.txt; mkdir -p dir; echo x > dir/y; echo t > /tmp/t.txt; sleep 999 & echo started',
      ),
    );
    const next = await pooled.run(job(S, 'bash', 'cat kept.txt /tmp/t.txt; pgrep -x sleep || echo no-sleep'));
    expect(next.stdout).toBe('hello\nt\nno-sleep\n');
  });

  it('runs as the sandbox user with no capabilities, no privilege escalation, seccomp, a read-only root, no token', async () => {
    const r = await pooled.run(
      job(
        S,
        'bash',
        'id -u; grep -E "^(CapEff|NoNewPrivs|Seccomp):" /proc/self/status | tr -s "\\t " " "; ' +
          'touch /etc/x 2>/dev/null && echo root-writable || echo root-ro; ' +
          'ls /var/run/secrets/kubernetes.io 2>/dev/null && echo token || echo no-token; hostname',
      ),
    );
    expect(r.stdout).toBe(
      '10001\nCapEff: 0000000000000000\nNoNewPrivs: 1\nSeccomp: 2\nroot-ro\nno-token\nsandbox\n',
    );
    const { body: pod } = await core.readNamespacedPod(r.containerId!, NAMESPACE);
    expect(pod.spec).toMatchObject({
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      restartPolicy: 'Always',
      securityContext: {
        runAsUser: 10001,
        runAsGroup: 10001,
        runAsNonRoot: true,
        seccompProfile: { type: 'RuntimeDefault' },
      },
    });
    expect(pod.spec?.hostNetwork ?? false).toBe(false);
    const c = pod.spec!.containers[0];
    expect(c.securityContext).toMatchObject({
      runAsUser: 10001,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
    });
    expect(c.resources?.requests).toEqual({ ...c.resources?.limits, cpu: '100m' });
    expect(c.resources?.limits).toMatchObject({
      cpu: '250m',
      memory: String(160 * MiB),
      'ephemeral-storage': String(192 * MiB),
    });
    expect(pod.spec!.volumes!.find((v) => v.name === 'workspace')?.emptyDir?.sizeLimit).toBe(
      String(64 * MiB),
    );
  });

  it('gives code no route out, and the namespace a deny-all NetworkPolicy', async () => {
    const r = await pooled.run(
      job(
        S,
        'python',
        'import socket\ns = socket.socket()\ns.settimeout(3)\ntry:\n  s.connect(("1.1.1.1", 80))\n  print("connected")\nexcept OSError as e:\n  print("refused", e.errno)',
      ),
    );
    expect(r.stdout).toMatch(/^refused \d+\n$/);
    const { body } = await kc
      .makeApiClient(k8s.NetworkingV1Api)
      .readNamespacedNetworkPolicy(NETWORK_POLICY_NAME, NAMESPACE);
    expect(body.spec?.policyTypes).toEqual(['Ingress', 'Egress']);
  });

  it('kills code at its timeout, and the session goes on', async () => {
    const started = Date.now();
    const r = await pooled.run(
      job(S, 'python', 'import time\nprint("before", flush=True)\ntime.sleep(60)', { timeoutMs: 1500 }),
    );
    expect(r.timedOut).toBe(true);
    expect(r.stdout).toBe('before\n');
    expect(Date.now() - started).toBeLessThan(8000);
    expect((await pooled.run(job(S, 'python', 'print("after")'))).stdout).toBe('after\n');
  });

  it('reports out of memory at the pod limit', async () => {
    const r = await pooled.run(job(S, 'python', 'x = bytearray(400 << 20)\nprint("survived")'));
    expect(r.limit?.code).toBe('OUT_OF_MEMORY');
    expect(r.stdout).toBe('');
    expect((await pooled.run(job(S, 'bash', 'cat kept.txt'))).stdout).toBe('hello\n');
  });

  it('caps the processes of a pod: a fork loop stops short, and the session goes on', async () => {
    const r = await pooled.run(
      job(
        S,
        'python',
        'import os, time\nn = 0\ntry:\n  while n < 2000:\n    if os.fork() == 0:\n      time.sleep(30)\n      os._exit(0)\n    n += 1\nexcept OSError as e:\n  print("stopped", n, e.errno)',
        { timeoutMs: 20_000 },
      ),
    );
    const m = /^stopped (\d+) 11\n$/.exec(r.stdout);
    expect(m).not.toBeNull();
    expect(Number(m![1])).toBeLessThan(128);
    expect((await pooled.run(job(S, 'bash', 'cat kept.txt'))).stdout).toBe('hello\n');
  });

  it("holds the session's kernels in the same pod, beside fresh runs", async () => {
    const box = await pooled.stateful.box(S, '/not/used');
    expect(box.containerId).toBe(A.sessions.list()[0].pod);
    await box.connection.kernelStart({
      kernel: 'krn_k8s',
      language: 'python',
      env: job(S, 'python', '').env,
      workspace: box.workspace,
    });
    const cell = (code: string) =>
      box.connection.cell(
        { kernel: 'krn_k8s', code, env: {}, timeoutMs: 5000, graceMs: 1000, capBytes: 4096, capLines: 100 },
        () => undefined,
      ).done;
    await cell('x = 41');
    expect((await pooled.run(job(S, 'bash', 'cat kept.txt'))).stdout).toBe('hello\n');
    expect((await cell('x + 1')).result).toBe('42');
    // Rich results come back from the pod's kernel as from any other: in order, the final value marked.
    const shown: Array<Record<string, unknown>> = [];
    await box.connection.cell(
      {
        kernel: 'krn_k8s',
        code: "display('<b>k8s</b>', raw=False)\nx",
        env: {},
        timeoutMs: 5000,
        graceMs: 1000,
        capBytes: 4096,
        capLines: 100,
      },
      () => undefined,
      (result) => shown.push(result),
    ).done;
    expect(shown).toEqual([
      { data: { 'text/plain': "'<b>k8s</b>'" } },
      { data: { 'text/plain': '41' }, isMainResult: true },
    ]);
    kernelBox = box;
  });

  it('a runner killed by the code fails the run with RUNNER_LOST; the next run re-attaches with the workspace intact', async () => {
    const before = A.sessions.list()[0];
    await expect(pooled.run(job(S, 'python', 'import os\nos.kill(os.getppid(), 9)'))).rejects.toMatchObject({
      code: 'RUNNER_LOST',
      retriable: true,
    });
    const after = await pooled.run(job(S, 'bash', 'cat kept.txt /tmp/t.txt'));
    expect(after.stdout).toBe('hello\nt\n');
    const now = A.sessions.list()[0];
    expect(now.pod).toBe(before.pod);
    expect(now.runnerPid).not.toBe(before.runnerPid);
    expect(now.workspace).toEqual(before.workspace);
    // The kernel died with its runner: its box is closed, and the next box is the new runner's.
    await kernelBox!.closed;
    expect(await pooled.stateful.box(S, '/not/used')).not.toBe(kernelBox);
  }, 60_000);

  it('the one-off tier sees the session files, and its writes and deletions come back', async () => {
    const r: TierRunResult = await oneOff.run(
      job(
        S,
        'python',
        'import os, shutil\nprint(open("kept.txt").read().strip(), sorted(os.listdir(".")))\n' +
          'open("from-one-off.txt", "w").write("new")\nos.remove("kept.txt")\nshutil.rmtree("dir")\nraise SystemExit(7)',
      ),
    );
    // The workspace holds the session's home (`.home`, which the runner makes when it is missing) beside its files.
    expect(r).toMatchObject({ exitCode: 7, stdout: "hello ['.home', 'dir', 'kept.txt']\n" });
    expect(r.containerId).toMatch(/^sy-c-/);
    const back = await pooled.run(job(S, 'bash', 'ls -A; cat from-one-off.txt'));
    expect(back.stdout).toBe('.home\nfrom-one-off.txt\nnew');
    expect(await eventually(async () => !(await A.client.readPod(r.containerId!)), 30_000)).toBe(true);
    const t = A.oneOff.last!;
    process.stdout.write(
      `one-off action: total ${t.totalMs.toFixed(0)} ms (launch ${t.launchMs.toFixed(0)}, copy out ${t.copyOutMs.toFixed(0)}, ` +
        `in ${t.copyInMs.toFixed(0)}, run ${t.runMs.toFixed(0)}, back ${t.copyBackMs.toFixed(0)}, delete ${t.deleteMs.toFixed(0)})\n`,
    );
  }, 60_000);

  it('reports the one-off pod out of memory, timed out, and deletes it either way', async () => {
    const [oom, slow] = await Promise.all([
      oneOff.run(job(S, 'python', 'x = bytearray(400 << 20)')),
      oneOff.run(job('ses_k8s_other', 'bash', 'echo start; sleep 60', { timeoutMs: 1500 })),
    ]);
    expect(oom.limit?.code).toBe('OUT_OF_MEMORY');
    expect(slow).toMatchObject({ timedOut: true, stdout: 'start\n', exitCode: 137, signal: 'SIGKILL' });
    await A.sessions.release('ses_k8s_other');
    const left = async () =>
      (await podsOf(A)).filter((p) => p.labels[K8S_LABELS.tier] === 'container').length === 0;
    expect(await eventually(left, 30_000)).toBe(true);
  }, 90_000);

  it('copies the workspace out and in as a tar (replace propagates deletions), small and large', async () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'sy-k8s-tar-'));
    try {
      fs.writeFileSync(path.join(dir, 'a.txt'), 'A');
      fs.mkdirSync(path.join(dir, 'sub'));
      fs.writeFileSync(path.join(dir, 'sub', 'big.bin'), Buffer.alloc(3 * MiB, 1)); // past the runner path: exec
      const tar = execFileSync('tar', ['-c', '-f', '-', '-C', dir, 'a.txt', 'sub'], { maxBuffer: 64 * MiB });
      await A.sessions.tarIn(S, tar, { replace: true });
      const listed = await A.sessions.runInPod(S, {
        language: 'bash',
        code: 'find . | sort; wc -c < sub/big.bin',
        timeoutMs: 10_000,
        capBytes: 4096,
      });
      expect(listed.exitCode).toBe(0);
      // The runner made the session's home again in the replaced workspace before the command ran.
      expect(listed.stdout.toString()).toBe(`.\n./.home\n./a.txt\n./sub\n./sub/big.bin\n${3 * MiB}\n`);
      const out = await A.sessions.tarOut(S);
      fs.writeFileSync(path.join(dir, 'out.tar'), out);
      const names = execFileSync('tar', ['-t', '-f', path.join(dir, 'out.tar')])
        .toString()
        .split('\n')
        .filter(Boolean)
        .sort();
      expect(names).toEqual(['.home/', 'a.txt', 'sub/', 'sub/big.bin']);
      await A.sessions.runInPod(S, {
        language: 'bash',
        code: 'rm -rf sub',
        timeoutMs: 10_000,
        capBytes: 4096,
      });
      const small = await A.sessions.tarOut(S);
      expect(small.length).toBeLessThan(64 * 1024);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);

  it('two engines racing for one warm pod: exactly one claims it', async () => {
    const B = engine({ min: 0, engineId: defaultEngineInstanceId() });
    try {
      // A's one warm pod (its pool refills to min 1 after the first claim).
      expect(await eventually(async () => (A.warm?.stats().warm ?? 0) >= 1, 60_000)).toBe(true);
      const now = A.clock.monotonic();
      const [ra, rb] = await Promise.all([
        A.warm!.claim('ses_race_a', now),
        B.warm!.claim('ses_race_b', now),
      ]);
      const winners = [ra, rb].filter((r) => r !== undefined);
      expect(winners).toHaveLength(1);
      const pod = (await A.client.readPod(winners[0].info.name))!;
      expect(pod.labels[K8S_LABELS.state]).toBe('claimed');
      expect(pod.annotations['switchyard.dev/session-id']).toBe(ra ? 'ses_race_a' : 'ses_race_b');
      expect(pod.annotations['switchyard.dev/engine-id']).toBe(ra ? A.options.engineId : B.options.engineId);
      await A.client.deletePod(pod.name, 1);
    } finally {
      await B.onApplicationShutdown();
    }
  }, 90_000);

  it('reaps the pods of a dead engine of this host at start-up, and leaves a live one alone', async () => {
    const host =
      os
        .hostname()
        .replace(/[^A-Za-z0-9_.-]/g, '_')
        .slice(0, 64) || 'host';
    const dead = `${host}:${DEAD_PID}:1234:dead`;
    const o = options({ engineId: dead });
    await A.client.createPod(
      sessionPodManifest({
        name: `sy-s-dead${Date.now() % 100000}`,
        image: IMAGE,
        engineId: dead,
        limits: o.limits.pooled,
        options: o,
        state: 'claimed',
        specHash: 'x',
      }),
    );
    const C = engine({ min: 0, engineId: defaultEngineInstanceId() });
    try {
      await C.start();
      const deadLeft = (await A.client.listPods(engineSelector(dead))).filter((p) => !p.deleting);
      expect(deadLeft).toHaveLength(0);
      expect((await podsOf(A)).length).toBeGreaterThan(0); // the live engine's pods
    } finally {
      await C.onApplicationShutdown();
    }
  }, 60_000);

  it('restarts a runner whose connection dropped instead of trusting it', async () => {
    const pod = await A.sessions.podFor(S);
    const before = pod.runnerPid;
    pod.runner.close(); // the engine side goes away, the runner lives on
    const r = await pooled.run(job(S, 'bash', 'cat a.txt'));
    expect(r.stdout).toBe('A');
    expect(pod.runnerPid).not.toBe(before);
  }, 60_000);

  it('shutdown deletes every pod of the engine', async () => {
    expect((await podsOf(A)).length).toBeGreaterThan(0);
    await A.onApplicationShutdown();
    expect(await podsOf(A)).toEqual([]);
    // exec of anything in a deleted pod is refused: nothing of the session is left running.
    await expect(A.client.exec('sy-s-none', RUNNER_CONTAINER, ['true'])).rejects.toMatchObject({
      code: expect.any(String),
    });
  }, 60_000);
});
