/**
 * Measurements of the Kubernetes tiers on the test cluster (`bash scripts/k8s.sh start`). Not part of the test
 * suite. Run from the repository root:
 *
 *   TS_NODE_PROJECT=tsconfig.json TS_NODE_TRANSPILE_ONLY=1 npx node -r ts-node/register -r tsconfig-paths/register \
 *     libs/sandbox/src/kubernetes/kubernetes.bench.ts
 */
import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { readImageTag } from '../container/container.options';
import type { TierJob } from '../sandbox.types';
import { ClientNodeKubeClient } from './client-node-kube-client';
import { RUNNER_CONTAINER } from './kubernetes.constants';
import { resolveKubernetesOptions, type KubernetesOptions } from './kubernetes.options';
import { KubernetesSandbox } from './kubernetes-sandbox';
import { KubernetesOneOffTier, KubernetesPooledTier } from './kubernetes-tiers';
import { podName, sessionPodManifest } from './pod-spec';

const REPO = path.resolve(__dirname, '../../../..');
const KUBECONFIG = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
const IMAGE =
  process.env.SWITCHYARD_SANDBOX_IMAGE || readImageTag(path.join(REPO, '.runtime/sandbox-image.tag'));
const NAMESPACE = 'switchyard-test';
const MiB = 2 ** 20;

Logger.overrideLogger(['error']);

const now = () => performance.now();
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
function pct(xs: number[], p: number): number {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.ceil((p / 100) * s.length) - 1)];
}
const fmt = (xs: number[]) =>
  `p50 ${pct(xs, 50).toFixed(1)} ms, p99 ${pct(xs, 99).toFixed(1)} ms (n=${xs.length})`;

function engine(nodeName: string, extra: KubernetesOptions): KubernetesSandbox {
  const o = resolveKubernetesOptions({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    image: IMAGE,
    nodeName,
    ...extra,
  });
  const client = new ClientNodeKubeClient({
    kubeconfigPath: KUBECONFIG,
    namespace: NAMESPACE,
    apiTimeoutMs: 10_000,
    execTimeoutMs: 120_000,
  });
  return new KubernetesSandbox(o, client);
}

function job(sessionId: string, code: string): TierJob {
  return {
    actionId: `bench_${Math.random().toString(16).slice(2, 8)}`,
    sessionId,
    language: 'python',
    code,
    env: { PATH: '/usr/bin:/bin', HOME: '/tmp' },
    timeoutMs: 10_000,
    workspaceDir: '/unused',
    output: { maxBytes: 65536, maxLines: 1000 },
  };
}

/** Until the pod is gone from the API (its resources free on the node): not part of what is measured. */
async function waitGone(sb: KubernetesSandbox, name: string): Promise<void> {
  while (await sb.client.readPod(name)) await sleep(100);
}

async function waitWarm(sb: KubernetesSandbox, n: number): Promise<void> {
  while ((sb.warm?.stats().warm ?? 0) < n) await sleep(50);
}

async function claims(nodeName: string): Promise<void> {
  const sb = engine(nodeName, {
    min: 3,
    max: 3,
    limits: { pooled: { cpus: 0.1, memoryBytes: 128 * MiB, tmpBytes: 16 * MiB } },
  });
  await sb.start();
  const warm: number[] = [];
  for (let i = 0; i < 20; i++) {
    await waitWarm(sb, 1);
    const t = now();
    await sb.sessions.podFor(`bench-claim-${i}`);
    warm.push(now() - t);
    void sb.sessions.release(`bench-claim-${i}`);
  }
  console.log(`warm claim (PATCH at version + attach + runner ping): ${fmt(warm)}`);
  // Idle warm pod memory, from its cgroup (v1 here; v2: memory.current).
  await waitWarm(sb, 1);
  const [pod] = await sb.client.listPods('switchyard.dev/state=warm,switchyard.dev/tier=session');
  const mem = await sb.client.exec(pod.name, RUNNER_CONTAINER, [
    '/bin/sh',
    '-c',
    'if [ -f /sys/fs/cgroup/memory.current ]; then cat /sys/fs/cgroup/memory.current; grep -E "^(anon|file) " /sys/fs/cgroup/memory.stat; ' +
      'else cat /sys/fs/cgroup/memory/memory.usage_in_bytes; grep -E "^total_(rss|cache) " /sys/fs/cgroup/memory/memory.stat; fi',
  ]);
  console.log(`idle warm pod memory (cgroup): ${mem.stdout.toString().trim().replace(/\n/g, ', ')}`);
  await sb.onApplicationShutdown();
}

async function runs(nodeName: string): Promise<void> {
  // The node has 2 CPUs: the session pod (1) and one one-off pod (0.5) at a time; the session pod is started cold.
  const limits = { cpus: 1, memoryBytes: 512 * MiB, workspaceBytes: 256 * MiB };
  const sb = engine(nodeName, {
    min: 0,
    max: 1,
    limits: { pooled: limits, container: { ...limits, cpus: 0.5 } },
  });
  const pooled = new KubernetesPooledTier(sb);
  const oneOff = new KubernetesOneOffTier(sb);
  await sb.start();
  const S = 'bench-runs';
  await pooled.run(job(S, 'print(1)'));
  console.log(
    `cold claim (create → Running → runner woken and pinged, 1 CPU pod): ${sb.sessions.lastClaimMs?.toFixed(0)} ms`,
  );
  const tier: number[] = [];
  const exec: number[] = [];
  const pod = sb.sessions.list()[0].pod;
  for (let i = 0; i < 20; i++) {
    let t = now();
    const r = await pooled.run(job(S, 'print(1)'));
    tier.push(now() - t);
    if (r.stdout !== '1\n') throw new Error(`unexpected output ${r.stdout}`);
    t = now();
    await sb.client.exec(pod, RUNNER_CONTAINER, ['python3', '-c', 'print(1)']);
    exec.push(now() - t);
  }
  console.log(`print(1) through KubernetesPooledTier.run (1 CPU pod): ${fmt(tier)}`);
  console.log(`python3 -c 'print(1)' by exec in the same pod:        ${fmt(exec)}`);

  // A 10 MB / 1000-file workspace, out and in.
  await sb.sessions.runInPod(S, {
    language: 'bash',
    code: 'mkdir -p d; for i in $(seq 1 1000); do head -c 10240 /dev/urandom > d/f$i; done',
    timeoutMs: 60_000,
    capBytes: 4096,
  });
  const out: number[] = [];
  const into: number[] = [];
  let tar: Buffer = Buffer.alloc(0);
  for (let i = 0; i < 5; i++) {
    let t = now();
    tar = await sb.sessions.tarOut(S);
    out.push(now() - t);
    t = now();
    await sb.sessions.tarIn(S, tar, { replace: true });
    into.push(now() - t);
  }
  console.log(`tarOut of ${(tar.length / MiB).toFixed(1)} MiB / 1000 files: ${fmt(out)}`);
  console.log(`tarIn (replace) of the same:          ${fmt(into)}`);

  // One-off actions: the small workspace's copy in and out included.
  await sb.sessions.runInPod(S, {
    language: 'bash',
    code: 'rm -rf d; echo x > a.txt',
    timeoutMs: 10_000,
    capBytes: 4096,
  });
  const oneOffs: number[] = [];
  const parts: string[] = [];
  for (let i = 0; i < 5; i++) {
    const t = now();
    const r = await oneOff.run(job(S, 'print(1)'));
    oneOffs.push(now() - t);
    await waitGone(sb, r.containerId!);
    const l = sb.oneOff.last!;
    parts.push(
      `launch ${l.launchMs.toFixed(0)}/in ${l.copyInMs.toFixed(0)}/run ${l.runMs.toFixed(0)}/back ${l.copyBackMs.toFixed(0)}/delete ${l.deleteMs.toFixed(0)}`,
    );
  }
  console.log(`one-off print(1) action (0.5 CPU pod): ${fmt(oneOffs)}; parts (ms): ${parts.join('; ')}`);

  // The raw floor: create a pod of the same image → Running → delete (the request; the kubelet finishes later).
  const raw: number[] = [];
  for (let i = 0; i < 5; i++) {
    const name = podName('one-off', 'raw');
    const manifest = sessionPodManifest({
      name,
      image: IMAGE!,
      engineId: sb.options.engineId,
      limits: sb.options.limits.container,
      options: sb.options,
      state: 'claimed',
      specHash: 'raw',
    });
    const t = now();
    await sb.client.createPod(manifest);
    await sb.launcher.waitRunning(name, now() + 60_000);
    await sb.client.deletePod(name, 1);
    raw.push(now() - t);
    await waitGone(sb, name);
  }
  console.log(`raw pod create → Running → delete:  ${fmt(raw)}`);
  await sb.onApplicationShutdown();
}

async function main(): Promise<void> {
  // The engine's HTTP server keeps its event loop alive; the tiers' own polling timers do not (they are unref'd).
  setInterval(() => undefined, 1000);
  if (!IMAGE) throw new Error('no sandbox image tag');
  const nodeName = execFileSync('kubectl', [
    '--kubeconfig',
    KUBECONFIG,
    'get',
    'nodes',
    '-o',
    'jsonpath={.items[0].metadata.name}',
  ]).toString();
  await claims(nodeName);
  await runs(nodeName);
}

main().then(
  () => process.exit(0),
  (err) => {
    console.error(err);
    process.exit(1);
  },
);
