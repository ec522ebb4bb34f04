/**
 * The sandbox backends the container-tier suites run against, one parameterized suite each (`describe.each`):
 * the Docker engine `npm test` starts, and the single-node Kubernetes cluster it starts (`scripts/k8s.sh`).
 * Each backend answers the questions the suites ask of the world outside the engine: is this sandbox still
 * there, which sandboxes carry these labels, what runs inside one.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { K8S_ANNOTATIONS, K8S_LABELS, labelValue } from '@switchyard/sandbox';
import {
  containerExists,
  containersWith,
  docker,
  forceRemove,
  LABELS,
  processesInContainer,
} from './host-probes';

export type BackendName = 'docker' | 'kubernetes';
export type ContainerTierName = 'pooled' | 'container';

/** A sandbox (Docker container, Kubernetes pod) of the engine under test. */
export interface SandboxRow {
  id: string;
  /** Docker's state (`running`, `exited`, …) or the pod's phase in lower case (`running`, `pending`, …). */
  state: string;
}

/** A sandbox with the exact ids it is labelled with (a pod's labels may hold hashes: its annotations do not). */
export interface SandboxDetails extends SandboxRow {
  /** The engine id (`<host>:<pid>:<ticks>:<instance>`). */
  engine: string;
  tier: ContainerTierName;
  /** Absent on a warm sandbox no session holds yet. */
  session?: string;
}

export interface SandboxSelector {
  /** The engine id (`EngineHarness`'s engine: `defaultEngineInstanceId()`, or the one a label carries). */
  engine?: string;
  session?: string;
  action?: string;
  tier?: ContainerTierName;
}

export interface SandboxBackendUnderTest {
  readonly name: BackendName;
  /** What the engine under test needs in its environment to use this backend. */
  env(): Promise<Record<string, string>>;
  /** Whether the sandbox with this id (full container id, pod name) is still there, in any state. */
  exists(id: string): Promise<boolean>;
  /**
   * Sandboxes labelled with every field given (pods on their way out are left out). Docker's warm pooled containers
   * carry no session label (labels are fixed when a container is made, before a session claims it); a Kubernetes
   * session pod gets one when it is claimed.
   */
  sandboxesWith(selector: SandboxSelector): Promise<SandboxRow[]>;
  /** The engine id a sandbox is labelled with (in its label form). */
  engineLabelOf(id: string): Promise<string>;
  /** `ps -eo args` inside a running sandbox, header dropped; empty when it is gone. */
  processesInside(id: string): Promise<string[]>;
  /** Whether the backend's control plane still answers (Docker's daemon, the API server). */
  healthy(): Promise<boolean>;
  /** The runtime of the one-off tier as /health reports it (`runsc`, `runc`, or a RuntimeClass). */
  oneOffRuntime(): Promise<string>;
  /** `sandboxesWith`, each with the exact engine id, tier and session it is labelled with. */
  describeSandboxes(selector: SandboxSelector): Promise<SandboxDetails[]>;
  /**
   * Live host processes (pids) in the sandbox's cgroups: Docker's container (docker-init, the runner, the code's
   * processes under runc), the pod's on Kubernetes (its pause process too). A pod is found by its uid, so a pod that
   * is gone must have been seen by one of these methods while it existed (else this throws: never a vacuous `[]`).
   */
  hostProcessesIn(id: string): Promise<string[]>;
  /** Removes sandboxes whatever their state (cleanup after a failure); those already gone are ignored. */
  remove(ids: string[]): Promise<void>;
}

const REPO = path.resolve(__dirname, '../..');
export const TEST_KUBECONFIG = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
export const TEST_NAMESPACE = 'switchyard-test';

/** Docker's label filter for a selector (every sandbox of any engine when it is empty). */
function dockerLabels(s: SandboxSelector): Record<string, string | true> {
  const labels: Record<string, string> = {};
  if (s.engine !== undefined) labels[LABELS.engine] = s.engine;
  if (s.session !== undefined) labels[LABELS.session] = s.session;
  if (s.action !== undefined) labels[LABELS.action] = s.action;
  if (s.tier !== undefined) labels[LABELS.tier] = s.tier;
  return Object.keys(labels).length ? labels : { [LABELS.engine]: true };
}

const docker_: SandboxBackendUnderTest = {
  name: 'docker',
  env: () => Promise.resolve({}),
  exists: (id) => containerExists(id),
  async sandboxesWith(s) {
    return (await containersWith(dockerLabels(s))).map((c) => ({ id: c.id, state: c.state }));
  },
  async engineLabelOf(id) {
    const [row] = JSON.parse(await docker('inspect', '--type', 'container', id)) as Array<{
      Config: { Labels: Record<string, string> };
    }>;
    return row.Config.Labels[LABELS.engine];
  },
  async processesInside(id) {
    try {
      const out = await docker('exec', id, 'ps', '-eo', 'args');
      return psLines(out);
    } catch {
      return [];
    }
  },
  async healthy() {
    try {
      return /\d/.test(await docker('version', '--format', '{{.Server.Version}}'));
    } catch {
      return false;
    }
  },
  async oneOffRuntime() {
    const runtimes = await docker('info', '--format', '{{json .Runtimes}}');
    return runtimes.includes('"runsc"') ? 'runsc' : 'runc';
  },
  async describeSandboxes(s) {
    return (await containersWith(dockerLabels(s))).map((c) => {
      const session = c.labels[LABELS.session];
      return {
        id: c.id,
        state: c.state,
        engine: c.labels[LABELS.engine],
        tier: c.labels[LABELS.tier] as ContainerTierName,
        ...(session !== undefined && { session }),
      };
    });
  },
  hostProcessesIn: (id) => Promise.resolve(processesInContainer(id.slice(0, 12))),
  remove: (ids) => forceRemove(ids),
};

function psLines(out: string): string[] {
  return out
    .split('\n')
    .slice(1)
    .map((l) => l.trim())
    .filter((l) => l && l !== 'ps -eo args');
}

let kubeConfig: k8s.KubeConfig | undefined;
function kube(): { kc: k8s.KubeConfig; core: k8s.CoreV1Api } {
  if (!kubeConfig) {
    if (!fs.existsSync(TEST_KUBECONFIG)) {
      throw new Error(
        `no kubeconfig at ${TEST_KUBECONFIG}: start the test cluster with \`bash scripts/k8s.sh start\``,
      );
    }
    kubeConfig = new k8s.KubeConfig();
    kubeConfig.loadFromFile(TEST_KUBECONFIG);
  }
  return { kc: kubeConfig, core: kubeConfig.makeApiClient(k8s.CoreV1Api) };
}

function statusCode(err: unknown): number | undefined {
  const e = err as { statusCode?: number; response?: { statusCode?: number } };
  return e.statusCode ?? e.response?.statusCode;
}

/** Runs a command in a pod's runner container and resolves with its stdout. */
async function execInPod(pod: string, command: string[]): Promise<string> {
  const { kc } = kube();
  const exec = new k8s.Exec(kc);
  const { PassThrough } = await import('node:stream');
  const stdout = new PassThrough();
  let out = '';
  stdout.on('data', (d: Buffer) => (out += d.toString('utf8')));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`exec in ${pod} timed out`)), 20_000);
    exec
      .exec(TEST_NAMESPACE, pod, 'runner', command, stdout, null, null, false, (status) => {
        clearTimeout(timer);
        if (status.status === 'Success') resolve();
        else reject(new Error(`exec in ${pod}: ${status.message ?? status.status}`));
      })
      .catch((err: unknown) => {
        clearTimeout(timer);
        reject(err instanceof Error ? err : new Error(String(err)));
      });
  });
  return out;
}

/** Live (not zombie) host processes with a cgroup path matching `pattern`, as pids. */
function processesInCgroup(pattern: RegExp): string[] {
  return fs.readdirSync('/proc').filter((pid) => {
    if (!/^\d+$/.test(pid)) return false;
    try {
      const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
      const state = stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3);
      return state !== 'Z' && state !== 'X' && pattern.test(fs.readFileSync(`/proc/${pid}/cgroup`, 'utf8'));
    } catch {
      return false; // it ended while we looked
    }
  });
}

/** Pod name → uid of every pod these helpers have seen: how a pod's cgroups are found, also once it is gone. */
const podUids = new Map<string, string>();

function seen(pod: k8s.V1Pod): k8s.V1Pod {
  const { name, uid } = pod.metadata ?? {};
  if (name && uid) podUids.set(name, uid);
  return pod;
}

async function podsWith(s: SandboxSelector): Promise<k8s.V1Pod[]> {
  const selector = [`${K8S_LABELS.managed}=true`];
  if (s.engine !== undefined) selector.push(`${K8S_LABELS.engine}=${labelValue(s.engine)}`);
  if (s.session !== undefined) selector.push(`${K8S_LABELS.session}=${labelValue(s.session)}`);
  if (s.action !== undefined) selector.push(`${K8S_LABELS.action}=${labelValue(s.action)}`);
  if (s.tier !== undefined) {
    selector.push(`${K8S_LABELS.tier}=${s.tier === 'pooled' ? 'session' : 'container'}`);
  }
  const { body } = await kube().core.listNamespacedPod(
    TEST_NAMESPACE,
    undefined,
    undefined,
    undefined,
    undefined,
    selector.join(','),
  );
  return body.items.map(seen).filter((p) => !p.metadata?.deletionTimestamp);
}

/**
 * Where the test cluster's kubelet keeps a pod's volumes on this host (its `--root-dir` is `kubelet/` beside the
 * kubeconfig: scripts/k8s.sh): `<root>/pods/<uid>`, gone once the kubelet has torn the pod down. The pod must have
 * been seen by one of the helpers here (its uid).
 */
export function podDirOnNode(pod: string): string {
  const uid = podUids.get(pod);
  if (!uid) throw new Error(`pod ${pod} was never seen: its uid is unknown`);
  return path.join(path.dirname(TEST_KUBECONFIG), 'kubelet', 'pods', uid);
}

const podRow = (p: k8s.V1Pod): SandboxRow => ({
  id: p.metadata!.name!,
  state: (p.status?.phase ?? 'unknown').toLowerCase(),
});

const kubernetes_: SandboxBackendUnderTest = {
  name: 'kubernetes',
  async env() {
    const { body } = await kube()
      .core.listNode()
      .catch((err: Error) => {
        throw new Error(
          `the test cluster does not answer (${err.message}): run \`bash scripts/k8s.sh start\``,
        );
      });
    const node = body.items[0]?.metadata?.name;
    if (!node) throw new Error('the test cluster has no node');
    return {
      SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
      KUBECONFIG: TEST_KUBECONFIG,
      SWITCHYARD_K8S_NAMESPACE: TEST_NAMESPACE,
      // No node name: the test cluster's scheduler places the pods, as on any cluster.
    };
  },
  async exists(id) {
    try {
      seen((await kube().core.readNamespacedPod(id, TEST_NAMESPACE)).body);
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false;
      throw err;
    }
  },
  async sandboxesWith(s) {
    return (await podsWith(s)).map(podRow);
  },
  async engineLabelOf(id) {
    const { body } = await kube().core.readNamespacedPod(id, TEST_NAMESPACE);
    return seen(body).metadata?.labels?.[K8S_LABELS.engine] ?? '';
  },
  async processesInside(id) {
    try {
      return psLines(await execInPod(id, ['ps', '-eo', 'args']));
    } catch {
      return [];
    }
  },
  async healthy() {
    try {
      await kube().core.listNode();
      return true;
    } catch {
      return false;
    }
  },
  oneOffRuntime: () => Promise.resolve('runc'),
  async describeSandboxes(s) {
    return (await podsWith(s)).map((p) => {
      const annotations = p.metadata?.annotations ?? {};
      const session = annotations[K8S_ANNOTATIONS.session];
      return {
        ...podRow(p),
        engine: annotations[K8S_ANNOTATIONS.engine] ?? '',
        tier: p.metadata?.labels?.[K8S_LABELS.tier] === 'container' ? 'container' : 'pooled',
        ...(session !== undefined && { session }),
      };
    });
  },
  async hostProcessesIn(id) {
    if (!podUids.has(id) && !(await kubernetes_.exists(id))) {
      throw new Error(`pod ${id} is gone and was never seen: its cgroups cannot be found`);
    }
    // The kubelet's pod cgroup is `pod<uid>` (cgroupfs driver) or `pod<uid with _ for ->` (systemd driver).
    const uid = podUids.get(id)!;
    return processesInCgroup(new RegExp(`[/-]pod(${uid}|${uid.replace(/-/g, '_')})[/.]`));
  },
  async remove(ids) {
    // A pod is deleted with a grace period, as the engine does (a forced deletion can upset the test kubelet).
    await Promise.all(
      ids.map((id) =>
        kube()
          .core.deleteNamespacedPod(id, TEST_NAMESPACE, undefined, undefined, 1)
          .catch(() => undefined),
      ),
    );
  },
};

/**
 * The backends under test: both, unless `SWITCHYARD_TEST_BACKENDS` names some (`docker`, `kubernetes`), e.g. to
 * rerun one side while working on it. CI runs both.
 */
export const SANDBOX_BACKENDS: SandboxBackendUnderTest[] = (() => {
  const wanted = process.env.SWITCHYARD_TEST_BACKENDS?.split(',').map((s) => s.trim());
  return [docker_, kubernetes_].filter((b) => !wanted || wanted.includes(b.name));
})();

/** A row of a per-tier suite: its label, the tier, and the backend of an engine of its own (none: the suite's). */
export type TierRow = [label: string, tier: string, backend: SandboxBackendUnderTest | undefined];

/**
 * The rows of a suite that runs its per-tier cases on each backend under test: `dockerTiers` on the suite's own
 * engine (Docker), then `kubernetesTiers` on an engine of the Kubernetes backend, labelled `<tier> (kubernetes)`.
 */
export function tierRows(dockerTiers: readonly string[], kubernetesTiers: readonly string[]): TierRow[] {
  const kubernetes = SANDBOX_BACKENDS.find((b) => b.name === 'kubernetes');
  return [
    ...dockerTiers.map((t): TierRow => [t, t, undefined]),
    ...(kubernetes ? kubernetesTiers.map((t): TierRow => [`${t} (kubernetes)`, t, kubernetes]) : []),
  ];
}
