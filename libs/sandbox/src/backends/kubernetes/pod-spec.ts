import { createHash, randomBytes } from 'node:crypto';
import { RUNNER_PROTOCOL } from '../../core/runner/runner-protocol';
import { SANDBOX_UID } from '../../core/sandbox-image';
import type { ContainerManifest, EmptyDirVolume, NetworkPolicyManifest, PodManifest } from './kube-types';
import {
  K8S_ANNOTATIONS,
  K8S_LABELS,
  MANAGED_VALUE,
  NETWORK_POLICY_NAME,
  ONE_OFF_TIER_VALUE,
  RUNNER_CONTAINER,
  SESSION_TIER_VALUE,
  type SessionPodState,
} from './kubernetes.constants';
import type { KubernetesLimits, ResolvedKubernetesOptions } from './kubernetes.options';

export const WORKSPACE_PATH = '/workspace';
/** The runner writes each run's code here (its own small memory-backed volume, so a full /tmp cannot stop runs). */
export const CODE_PATH = '/run/switchyard';
const CODE_DIR_BYTES = 8 * 2 ** 20;
export const RUNNER_PATH = '/opt/switchyard/runner/runner.py';
const PYTHON = '/usr/bin/python3';
/**
 * Memory a session pod keeps above its runner's limit, for a runner restarted after code left the runner's cgroup
 * full of memory no process holds (see `reserveContainer`).
 */
export const RUNNER_RESERVE_BYTES = 64 * 2 ** 20;
export const RESERVE_CONTAINER = 'reserve';

/**
 * The pod's entry point, ahead of the runner: sets the rlimits Docker set as ulimits (Kubernetes has none: nofile,
 * fsize, core 0), then waits for one byte on stdin before it becomes the runner. The runner greets once, at start;
 * the attach API only streams output produced while attached, so the engine attaches first and then sends the byte
 * (and does so again after the kubelet restarted a runner that died). `os.read(0, 1)` takes exactly that byte.
 */
export const RUNNER_ENTRY =
  'import os, resource, sys\n' +
  'nofile, fsize = int(sys.argv[1]), int(sys.argv[2])\n' +
  'resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, nofile))\n' +
  'resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))\n' +
  'resource.setrlimit(resource.RLIMIT_CORE, (0, 0))\n' +
  'os.read(0, 1)\n' +
  `os.execv(${JSON.stringify(PYTHON)}, [${JSON.stringify(PYTHON)}, "-I", "-S", ${JSON.stringify(RUNNER_PATH)}])\n`;

export type PodSpecOptions = Pick<
  ResolvedKubernetesOptions,
  'imagePullPolicy' | 'nodeName' | 'nodeSelector' | 'hostname' | 'runtimeClassName'
>;

interface CommonInput {
  name: string;
  image: string;
  engineId: string;
  limits: KubernetesLimits;
  options: PodSpecOptions;
}

export interface SessionPodInput extends CommonInput {
  state: SessionPodState;
  /** Set when the pod is made for a session at once (a cold claim, a session image), rather than warmed. */
  sessionId?: string;
  /** `sessionPodSpecHash` of the engine that makes it. */
  specHash: string;
}

export interface OneOffPodInput extends CommonInput {
  sessionId: string;
  actionId: string;
  /** Backstop: the kubelet kills the pod this long after its start even if the engine is gone. */
  activeDeadlineSeconds: number;
}

/**
 * A label value standing for `value`: itself when it is label-safe, else a readable form (anything but
 * `[A-Za-z0-9_.-]` replaced by `_`, cut to 63, alphanumeric at both ends), else a hash. Labels select; the exact
 * value goes in the annotation of the same meaning.
 */
export function labelValue(value: string): string {
  const safe = value.replace(/[^A-Za-z0-9_.-]/g, '_');
  if (safe.length <= 63 && /^[A-Za-z0-9]/.test(safe) && /[A-Za-z0-9]$/.test(safe)) return safe;
  return `h${createHash('sha256').update(value).digest('hex').slice(0, 40)}`;
}

/**
 * What makes two session pods interchangeable, hashed: a warm pod is claimed only by an engine whose pods would be
 * made the same (image, limits, placement, runner protocol).
 */
export function sessionPodSpecHash(image: string, limits: KubernetesLimits, options: PodSpecOptions): string {
  const inputs = {
    image,
    limits,
    pull: options.imagePullPolicy,
    node: options.nodeName ?? null,
    selector: options.nodeSelector ?? null,
    hostname: options.hostname,
    protocol: RUNNER_PROTOCOL,
    entry: RUNNER_ENTRY,
    reserve: RUNNER_RESERVE_BYTES,
  };
  return createHash('sha256').update(JSON.stringify(inputs)).digest('hex').slice(0, 16);
}

/** A fresh pod name: `sy-s-<hex>` for session pods, `sy-c-<action>-<hex>` for one-off pods (DNS-1123). */
export function podName(kind: 'session' | 'one-off', actionId?: string): string {
  const suffix = randomBytes(5).toString('hex');
  if (kind === 'session') return `sy-s-${suffix}`;
  const action = (actionId ?? '')
    .toLowerCase()
    .replace(/[^a-z0-9-]/g, '-')
    .replace(/-+/g, '-')
    .replace(/^-|-$/g, '')
    .slice(0, 30);
  return action ? `sy-c-${action}-${suffix}` : `sy-c-${suffix}`;
}

/** Kubernetes quantities: bytes as plain integers, CPUs in millicores (at least 1m). */
export const bytesQuantity = (bytes: number): string => String(Math.floor(bytes));
export const cpuQuantity = (cpus: number): string => `${Math.max(1, Math.round(cpus * 1000))}m`;

function volumes(limits: KubernetesLimits): EmptyDirVolume[] {
  return [
    // tmpfs, as Docker's /tmp: ENOSPC at the cap, charged to the memory limit.
    { name: 'tmp', emptyDir: { medium: 'Memory', sizeLimit: bytesQuantity(limits.tmpBytes) } },
    { name: 'code', emptyDir: { medium: 'Memory', sizeLimit: bytesQuantity(CODE_DIR_BYTES) } },
    // Disk-backed: the kubelet evicts the pod past the sizeLimit (it cannot make the writes fail instead).
    { name: 'workspace', emptyDir: { sizeLimit: bytesQuantity(limits.workspaceBytes) } },
  ];
}

/**
 * The runner container. SECURITY.md's container settings, as Kubernetes spells them: uid/gid 10001, non-root, no
 * capabilities, no privilege escalation (no_new_privs), the runtime's default seccomp profile, a read-only root
 * with size-limited emptyDirs as the only writable places, limits on CPU, memory and ephemeral storage (requested in
 * full but for CPU, requested at `cpuRequest`), no service-account token, no host namespaces.
 *
 * Pids: Kubernetes has no per-pod or per-container pids field. The control is the kubelet's `podPidsLimit`
 * (KubeletConfiguration), which applies to every pod of the node: `scripts/k8s.sh` sets 128, as the Docker tiers'
 * `PidsLimit`, and docs/kubernetes.md asks clusters to. Without it a fork bomb is stopped only by the memory limit and the
 * run's timeout.
 */
function runnerContainer(
  image: string,
  limits: KubernetesLimits,
  options: PodSpecOptions,
  restartWhenPinned: boolean,
): ContainerManifest {
  const quantities = {
    cpu: cpuQuantity(limits.cpus),
    memory: bytesQuantity(limits.memoryBytes),
    'ephemeral-storage': bytesQuantity(limits.ephemeralStorageBytes),
  };
  return {
    name: RUNNER_CONTAINER,
    image,
    imagePullPolicy: options.imagePullPolicy,
    command: [PYTHON, '-I', '-c', RUNNER_ENTRY, String(limits.openFiles), String(limits.fileSizeBytes)],
    workingDir: WORKSPACE_PATH,
    env: [
      { name: 'PATH', value: '/usr/local/bin:/usr/bin:/bin' },
      { name: 'LANG', value: 'C.UTF-8' },
      { name: 'HOME', value: '/tmp' },
      // The runner's own setting (it never passes its environment on): see `reserveContainer`.
      ...(restartWhenPinned ? [{ name: 'SWITCHYARD_RUNNER_RESTART_WHEN_PINNED', value: '1' }] : []),
    ],
    // The runner's protocol runs over the attach API: stdin stays open across attaches (the engine may re-attach).
    stdin: true,
    stdinOnce: false,
    tty: false,
    securityContext: {
      runAsUser: SANDBOX_UID,
      runAsGroup: SANDBOX_UID,
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      privileged: false,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    resources: {
      requests: { ...quantities, cpu: cpuQuantity(limits.cpuRequest) },
      limits: { ...quantities },
    },
    volumeMounts: [
      { name: 'tmp', mountPath: '/tmp' },
      { name: 'code', mountPath: CODE_PATH },
      { name: 'workspace', mountPath: WORKSPACE_PATH },
    ],
    terminationMessagePolicy: 'File',
  };
}

/**
 * A session pod's init container: it only exits (`/bin/true`), but the kubelet sizes the pod's memory cgroup as the
 * larger of its containers' limits summed and any init container's, so its limit (the runner's +
 * RUNNER_RESERVE_BYTES) leaves that much above the runner's own. The reserve matters once code has filled the
 * memory-backed /tmp with files (empty ones cost inodes and dentries, charged to memory, which the byte cap of the
 * emptyDir does not bound): the OOM killer takes the code, yet the runner's cgroup stays at its limit, held by no
 * process. The runner then leaves (`restarting`, runner_runs.py); the kubelet restarts it in a fresh cgroup, the
 * charges move to the pod's, and the reserve is room for the runner, the workspace snapshots and an `rm` of /tmp.
 */
function reserveContainer(
  image: string,
  limits: KubernetesLimits,
  options: PodSpecOptions,
): ContainerManifest {
  const runner = runnerContainer(image, limits, options, false);
  return {
    ...runner,
    name: RESERVE_CONTAINER,
    command: ['/bin/true'],
    env: [],
    stdin: false,
    resources: {
      requests: { cpu: cpuQuantity(limits.cpuRequest), memory: bytesQuantity(16 * 2 ** 20) },
      limits: {
        cpu: cpuQuantity(limits.cpus),
        memory: bytesQuantity(limits.memoryBytes + RUNNER_RESERVE_BYTES),
      },
    },
    volumeMounts: [],
  };
}

function podManifest(
  input: CommonInput,
  labels: Record<string, string>,
  annotations: Record<string, string>,
  restartPolicy: 'Always' | 'Never',
  runtimeClassName?: string,
): PodManifest {
  const session = restartPolicy === 'Always'; // a session pod restarts its runner; a one-off pod never
  const { options } = input;
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: input.name, labels, annotations },
    spec: {
      ...(options.nodeName !== undefined && { nodeName: options.nodeName }),
      ...(options.nodeSelector !== undefined && { nodeSelector: { ...options.nodeSelector } }),
      ...(runtimeClassName !== undefined && { runtimeClassName }),
      restartPolicy,
      hostname: options.hostname,
      automountServiceAccountToken: false,
      enableServiceLinks: false,
      hostNetwork: false,
      hostPID: false,
      hostIPC: false,
      // The pause process is PID 1 and reaps orphans (as docker-init does for the Docker tiers); the runner is an
      // ordinary process the code can kill (it is not a security boundary), so a dead runner is restarted by the kubelet.
      shareProcessNamespace: true,
      terminationGracePeriodSeconds: 1,
      securityContext: {
        runAsUser: SANDBOX_UID,
        runAsGroup: SANDBOX_UID,
        runAsNonRoot: true,
        fsGroup: SANDBOX_UID,
        seccompProfile: { type: 'RuntimeDefault' },
      },
      ...(session && { initContainers: [reserveContainer(input.image, input.limits, options)] }),
      containers: [runnerContainer(input.image, input.limits, options, session)],
      volumes: volumes(input.limits),
    },
  };
}

/**
 * A session pod: `restartPolicy: Always`, so a runner that dies (killed by the code, OOM) is restarted by the kubelet
 * while the pod, and its emptyDir workspace, survive; the engine re-attaches. Warm pods carry no session; a claim
 * sets it (`claimLabels`).
 */
export function sessionPodManifest(input: SessionPodInput): PodManifest {
  const labels: Record<string, string> = {
    [K8S_LABELS.managed]: MANAGED_VALUE,
    [K8S_LABELS.engine]: labelValue(input.engineId),
    [K8S_LABELS.tier]: SESSION_TIER_VALUE,
    [K8S_LABELS.state]: input.state,
    [K8S_LABELS.spec]: input.specHash,
  };
  const annotations: Record<string, string> = {
    [K8S_ANNOTATIONS.engine]: input.engineId,
    [K8S_ANNOTATIONS.image]: input.image,
  };
  if (input.sessionId !== undefined) {
    labels[K8S_LABELS.session] = labelValue(input.sessionId);
    annotations[K8S_ANNOTATIONS.session] = input.sessionId;
  }
  return podManifest(input, labels, annotations, 'Always');
}

/** What a claim writes on a warm pod: the session, its new owner and state. */
export function claimLabels(
  engineId: string,
  sessionId: string,
): { labels: Record<string, string>; annotations: Record<string, string> } {
  return {
    labels: {
      [K8S_LABELS.state]: 'claimed',
      [K8S_LABELS.engine]: labelValue(engineId),
      [K8S_LABELS.session]: labelValue(sessionId),
    },
    annotations: { [K8S_ANNOTATIONS.engine]: engineId, [K8S_ANNOTATIONS.session]: sessionId },
  };
}

/** A one-off pod: one action, `restartPolicy: Never`, the configured RuntimeClass (gVisor, Kata) when there is one. */
export function oneOffPodManifest(input: OneOffPodInput): PodManifest {
  const labels = {
    [K8S_LABELS.managed]: MANAGED_VALUE,
    [K8S_LABELS.engine]: labelValue(input.engineId),
    [K8S_LABELS.tier]: ONE_OFF_TIER_VALUE,
    [K8S_LABELS.session]: labelValue(input.sessionId),
    [K8S_LABELS.action]: labelValue(input.actionId),
  };
  const annotations = {
    [K8S_ANNOTATIONS.engine]: input.engineId,
    [K8S_ANNOTATIONS.session]: input.sessionId,
    [K8S_ANNOTATIONS.action]: input.actionId,
    [K8S_ANNOTATIONS.image]: input.image,
  };
  const manifest = podManifest(input, labels, annotations, 'Never', input.options.runtimeClassName);
  return { ...manifest, spec: { ...manifest.spec, activeDeadlineSeconds: input.activeDeadlineSeconds } };
}

/**
 * Denies all ingress and egress of every Switchyard sandbox pod in the namespace. Clusters whose network plugin
 * enforces NetworkPolicies need it; the test cluster does not enforce them (its pods have no route out anyway).
 */
export function networkPolicyManifest(): NetworkPolicyManifest {
  return {
    apiVersion: 'networking.k8s.io/v1',
    kind: 'NetworkPolicy',
    metadata: { name: NETWORK_POLICY_NAME, labels: { [K8S_LABELS.managed]: MANAGED_VALUE } },
    spec: {
      podSelector: { matchLabels: { [K8S_LABELS.managed]: MANAGED_VALUE } },
      policyTypes: ['Ingress', 'Egress'],
      ingress: [],
      egress: [],
    },
  };
}

/** The label selector of this engine's pods (optionally of one tier or state). */
export function engineSelector(engineId: string, extra: Record<string, string> = {}): string {
  return selector({
    [K8S_LABELS.managed]: MANAGED_VALUE,
    [K8S_LABELS.engine]: labelValue(engineId),
    ...extra,
  });
}

export function selector(labels: Record<string, string>): string {
  return Object.entries(labels)
    .map(([k, v]) => `${k}=${v}`)
    .join(',');
}
