/**
 * The sandbox backends the container-tier suites run against, one parameterized suite each (`describe.each`):
 * the Docker engine `npm test` starts, and the single-node Kubernetes cluster it starts (`scripts/k8s.sh`).
 * Each backend answers the questions the suites ask of the world outside the engine: is this sandbox still
 * there, which sandboxes carry these labels, what runs inside one.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { K8S_LABELS, labelValue } from '@switchyard/sandbox';
import { containerExists, containersWith, docker, LABELS } from './host-probes';

export type BackendName = 'docker' | 'kubernetes';
export type ContainerTierName = 'pooled' | 'container';

/** A sandbox (Docker container, Kubernetes pod) of the engine under test. */
export interface SandboxRow {
  id: string;
  /** Docker's state (`running`, `exited`, …) or the pod's phase in lower case (`running`, `pending`, …). */
  state: string;
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
}

const REPO = path.resolve(__dirname, '../..');
export const TEST_KUBECONFIG = path.resolve(REPO, process.env.KUBECONFIG ?? '.runtime/k8s/kubeconfig');
export const TEST_NAMESPACE = 'switchyard-test';

const docker_: SandboxBackendUnderTest = {
  name: 'docker',
  env: () => Promise.resolve({}),
  exists: (id) => containerExists(id),
  async sandboxesWith(s) {
    const labels: Record<string, string> = {};
    if (s.engine !== undefined) labels[LABELS.engine] = s.engine;
    if (s.session !== undefined) labels[LABELS.session] = s.session;
    if (s.action !== undefined) labels[LABELS.action] = s.action;
    if (s.tier !== undefined) labels[LABELS.tier] = s.tier;
    return (await containersWith(Object.keys(labels).length ? labels : { [LABELS.engine]: true })).map(
      (c) => ({ id: c.id, state: c.state }),
    );
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
      // The test cluster has no scheduler: pods name their node.
      SWITCHYARD_K8S_NODE_NAME: node,
    };
  },
  async exists(id) {
    try {
      await kube().core.readNamespacedPod(id, TEST_NAMESPACE);
      return true;
    } catch (err) {
      if (statusCode(err) === 404) return false;
      throw err;
    }
  },
  async sandboxesWith(s) {
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
    return body.items
      .filter((p) => !p.metadata?.deletionTimestamp)
      .map((p) => ({ id: p.metadata!.name!, state: (p.status?.phase ?? 'unknown').toLowerCase() }));
  },
  async engineLabelOf(id) {
    const { body } = await kube().core.readNamespacedPod(id, TEST_NAMESPACE);
    return body.metadata?.labels?.[K8S_LABELS.engine] ?? '';
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
};

/**
 * The backends under test: both, unless `SWITCHYARD_TEST_BACKENDS` names some (`docker`, `kubernetes`), e.g. to
 * rerun one side while working on it. CI runs both.
 */
export const SANDBOX_BACKENDS: SandboxBackendUnderTest[] = (() => {
  const wanted = process.env.SWITCHYARD_TEST_BACKENDS?.split(',').map((s) => s.trim());
  return [docker_, kubernetes_].filter((b) => !wanted || wanted.includes(b.name));
})();
