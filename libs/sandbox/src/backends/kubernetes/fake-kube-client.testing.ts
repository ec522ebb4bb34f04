import { PassThrough } from 'node:stream';
import { KubeClient } from './kube-client';
import type {
  AccessAnswer,
  AccessCheck,
  AttachedStreams,
  DeletePrecondition,
  ExecResult,
  ExecStream,
  KubeNode,
  NetworkPolicyManifest,
  PodInfo,
  PodManifest,
} from './kube-types';
import { KubeApiError } from './kubernetes.errors';

/** One call the fake received, in order. */
export interface FakeCall {
  op: string;
  name?: string;
  detail?: unknown;
}

/** The command side of a fake streamed exec: what the engine wrote, and where the command's output goes. */
export interface FakeExecIo {
  name: string;
  argv: string[];
  stdin: PassThrough;
  stdout: PassThrough;
  stderr: PassThrough;
}

/**
 * An in-memory API server for unit tests: pods with resource versions (every write bumps the namespace's counter, as
 * etcd does), label selectors, optimistic claims and delete preconditions, and a record of every call. It records;
 * it does not script answers. Pods are `Running` as soon as they are created (no kubelet); `kubeletUpdate` bumps a
 * pod's version the way a status update does. Attach and collected exec are not faked; a streamed exec runs
 * `execCommand` (the test's stand-in for the command: it reads stdin, writes stdout/stderr, resolves its exit code).
 *
 * @internal
 */
export class FakeKubeClient extends KubeClient {
  readonly namespace = 'fake-ns';
  readonly calls: FakeCall[] = [];
  readonly pods = new Map<string, PodInfo>();
  readonly policies = new Map<string, NetworkPolicyManifest>();
  nodeList: KubeNode[] = [
    {
      name: 'node-a',
      ready: true,
      unschedulable: false,
      labels: {},
      images: ['docker.io/switchyard/sandbox:t1'],
    },
  ];
  /** While set, `claim` waits here before it compares versions, so that callers can be made to race. */
  claimGate?: Promise<void>;
  /** What a streamed exec runs; without it `execStream` fails as a server without streams would. */
  execCommand?: (io: FakeExecIo) => Promise<number>;
  /** Set to make every call fail as an unreachable server would. */
  down = false;
  /** Whether the namespace exists, as `namespaceExists` answers. */
  namespacePresent = true;
  /** Rights the account lacks, as `verb resource[/subresource]` (`create pods/exec`). */
  readonly denied = new Set<string>();
  private version = 100;
  private uids = 0;

  override get server(): string {
    return 'https://fake-apiserver:6443';
  }

  override get source(): string {
    return 'KUBECONFIG /fake/kubeconfig, context fake';
  }

  async ping(): Promise<string> {
    this.record('ping');
    return 'v1.34.4';
  }

  async namespaceExists(): Promise<boolean> {
    this.record('namespaceExists');
    return this.namespacePresent;
  }

  async whoAmI(): Promise<string | undefined> {
    this.record('whoAmI');
    return 'fake-user';
  }

  async reviewAccess(check: AccessCheck): Promise<AccessAnswer> {
    const right = `${check.verb} ${check.resource}${check.subresource ? `/${check.subresource}` : ''}`;
    this.record('reviewAccess', undefined, right);
    return { allowed: !this.denied.has(right) };
  }

  async nodes(): Promise<KubeNode[]> {
    this.record('nodes');
    return this.nodeList.map((n) => ({ ...n }));
  }

  async createPod(manifest: PodManifest): Promise<PodInfo> {
    this.record('createPod', manifest.metadata.name, manifest);
    if (this.pods.has(manifest.metadata.name))
      throw new KubeApiError('KUBE_CONFLICT', 'exists', { status: 409 });
    const pod: PodInfo = {
      name: manifest.metadata.name,
      uid: `uid-${++this.uids}`,
      phase: 'Running',
      labels: { ...manifest.metadata.labels },
      annotations: { ...manifest.metadata.annotations },
      resourceVersion: this.nextVersion(),
      deleting: false,
      createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, this.uids)).toISOString(),
      containers: [
        {
          name: 'runner',
          containerId: `containerd://${this.uids}`,
          ready: true,
          restartCount: 0,
          state: 'running',
        },
      ],
      ...(manifest.spec.nodeName !== undefined && { nodeName: manifest.spec.nodeName }),
    };
    this.pods.set(pod.name, pod);
    return clone(pod);
  }

  async readPod(name: string): Promise<PodInfo | undefined> {
    await this.tick();
    this.record('readPod', name);
    const pod = this.pods.get(name);
    return pod && clone(pod);
  }

  async listPods(labelSelector: string): Promise<PodInfo[]> {
    await this.tick();
    this.record('listPods', undefined, labelSelector);
    const wanted = labelSelector
      .split(',')
      .filter(Boolean)
      .map((term) => term.split('=') as [string, string]);
    return [...this.pods.values()].filter((p) => wanted.every(([k, v]) => p.labels[k] === v)).map(clone);
  }

  async deletePod(name: string, graceSeconds: number, precondition?: DeletePrecondition): Promise<boolean> {
    await this.tick();
    this.record('deletePod', name, { graceSeconds, precondition });
    const pod = this.pods.get(name);
    if (!pod) return true;
    if (precondition?.resourceVersion !== undefined && precondition.resourceVersion !== pod.resourceVersion)
      return false;
    if (precondition?.uid !== undefined && precondition.uid !== pod.uid) return false;
    this.pods.delete(name);
    return true;
  }

  async claim(
    name: string,
    resourceVersion: string,
    labels: Record<string, string>,
    annotations: Record<string, string> = {},
  ): Promise<boolean> {
    await this.tick();
    await this.claimGate;
    const pod = this.pods.get(name);
    const won = pod !== undefined && pod.resourceVersion === resourceVersion;
    this.record('claim', name, { resourceVersion, labels, won });
    if (!pod || !won) return false;
    Object.assign(pod.labels, labels);
    Object.assign(pod.annotations, annotations);
    pod.resourceVersion = this.nextVersion();
    return true;
  }

  async attach(name: string): Promise<AttachedStreams> {
    this.record('attach', name);
    throw new KubeApiError('KUBE_STREAM', 'the fake client has no streams', { retriable: true });
  }

  async exec(name: string, _container: string, argv: string[]): Promise<ExecResult> {
    this.record('exec', name, argv);
    throw new KubeApiError('KUBE_STREAM', 'the fake client has no streams', { retriable: true });
  }

  async execStream(name: string, _container: string, argv: string[]): Promise<ExecStream> {
    this.record('execStream', name, argv);
    const command = this.execCommand;
    if (!command)
      throw new KubeApiError('KUBE_STREAM', 'the fake client has no streams', { retriable: true });
    const io: FakeExecIo = {
      name,
      argv,
      stdin: new PassThrough(),
      stdout: new PassThrough(),
      stderr: new PassThrough(),
    };
    let closed = false;
    const close = () => {
      if (closed) return;
      closed = true;
      // As the server does: the command sees its stdin end, the engine its output end.
      for (const s of [io.stdin, io.stdout, io.stderr]) if (!s.writableEnded) s.end();
    };
    const exit = command(io).then(
      (exitCode) => {
        const wasClosed = closed;
        close();
        if (wasClosed)
          throw new KubeApiError('KUBE_STREAM', 'the connection closed without an exit status', {
            retriable: true,
          });
        return { exitCode };
      },
      (err: unknown) => {
        close();
        throw err;
      },
    );
    exit.catch(() => undefined);
    return { stdin: io.stdin, stdout: io.stdout, stderr: io.stderr, exit, close };
  }

  async ensureNetworkPolicy(manifest: NetworkPolicyManifest): Promise<boolean> {
    this.record('ensureNetworkPolicy', manifest.metadata.name);
    if (this.policies.has(manifest.metadata.name)) return false;
    this.policies.set(manifest.metadata.name, manifest);
    return true;
  }

  /** What a kubelet status update does to a pod: a new resource version, nothing else. */
  kubeletUpdate(name: string): void {
    const pod = this.pods.get(name);
    if (pod) pod.resourceVersion = this.nextVersion();
  }

  /** Calls of one kind, in order. */
  callsOf(op: string): FakeCall[] {
    return this.calls.filter((c) => c.op === op);
  }

  private record(op: string, name?: string, detail?: unknown): void {
    if (this.down)
      throw new KubeApiError('KUBE_UNAVAILABLE', `${op}: connect ECONNREFUSED`, { retriable: true });
    this.calls.push({ op, ...(name !== undefined && { name }), ...(detail !== undefined && { detail }) });
  }

  private nextVersion(): string {
    return String(++this.version);
  }

  /** Lets other callers interleave, as network round trips would. */
  private tick(): Promise<void> {
    return new Promise((resolve) => setImmediate(resolve));
  }
}

function clone(pod: PodInfo): PodInfo {
  return structuredClone(pod);
}
