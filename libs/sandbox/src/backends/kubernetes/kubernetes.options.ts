import { defaultWarmStarts } from '@switchyard/common';
import * as path from 'node:path';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import { readImageTag } from '../../core/sandbox-image';
import { SandboxConfigError } from '../../core/sandbox.errors';
import { type Bounds, checkIntegers, type IntegerOption } from '../../core/integer-options';
import { CONTAINER_LIMIT_BOUNDS, POOL_BOUNDS } from '../../core/container-bounds';

const MiB = 2 ** 20;
const GiB = 2 ** 30;

/**
 * Resources of one pod's runner container. Memory and ephemeral storage are requested in full (the node must have
 * them: their limits are what the kernel and the kubelet enforce); CPU is requested at `cpuRequest` and capped at
 * `cpus`, so idle warm pods do not fill a node's CPU on paper (QoS `Burstable`).
 */
export interface KubernetesLimits {
  /** Memory limit (and request). Default 512 MiB. Memory-backed volumes (`/tmp`, the code dir) count against it. */
  memoryBytes: number;
  /** CPU limit, in CPUs (0.25 = `250m`): the CFS quota code runs under. Default 1. */
  cpus: number;
  /** CPU request, in CPUs: what the scheduler reserves per pod. Default the smaller of 0.1 and `cpus`. */
  cpuRequest: number;
  /**
   * The `/workspace` emptyDir's `sizeLimit`. It is disk-backed, so the kubelet enforces it by evicting the pod (the
   * workspace is then lost), not with ENOSPC. Default 1 GiB.
   */
  workspaceBytes: number;
  /**
   * The container's `ephemeral-storage` limit (and request): the workspace, the container's logs and its writable
   * layer together (the pod is evicted past it). Must exceed `workspaceBytes`; default `workspaceBytes` + 128 MiB.
   */
  ephemeralStorageBytes: number;
  /** `/tmp`, a memory-backed emptyDir (tmpfs: ENOSPC at the cap, charged to the memory limit). Default 64 MiB. */
  tmpBytes: number;
  /** RLIMIT_NOFILE of the runner and everything it starts (set by the pod's entry point). Default 256. */
  openFiles: number;
  /** RLIMIT_FSIZE, likewise. Default 64 MiB. */
  fileSizeBytes: number;
}

/** Options that bound how many sessions the backend serves at once: a refusal names the one to raise. */
export type KubernetesCapacitySetting = 'min' | 'max' | 'maxSessions' | 'acquireTimeoutMs';
/** Options that say where pods go and how long they may take to start: a cluster that fails them names the one. */
export type KubernetesPlacementSetting = 'namespace' | 'nodeName' | 'nodeSelector' | 'podStartTimeoutMs';
/** Options that say which cluster and account: the API server not answering, or refusing, names them. */
export type KubernetesAccessSetting = 'kubeconfigPath' | 'context';
/** Options that say which image a pod runs and how the node gets it: an image the node cannot have names them. */
export type KubernetesImageSetting = 'image' | 'imagePullPolicy';
/** Options behind what a pod asks its node for: a pod no node has room for names them. */
export type KubernetesResourceSetting =
  'cpuRequest' | 'pooledMemoryBytes' | 'containerMemoryBytes' | 'workspaceBytes';
/** Every option a refusal or a failure of the cluster may name. */
export type KubernetesSetting =
  | KubernetesCapacitySetting
  | KubernetesPlacementSetting
  | KubernetesAccessSetting
  | KubernetesImageSetting
  | KubernetesResourceSetting;

/** What `KubernetesSandboxModule.forRoot` accepts: option > default. The library reads no environment. */
export interface KubernetesOptions {
  /** A kubeconfig file. Absent: the in-cluster configuration (the engine's pod's service account). */
  kubeconfigPath?: string;
  /** A context of the kubeconfig other than its current one. */
  context?: string;
  /** The one namespace every pod goes in. It must exist, with its `default` ServiceAccount. Default `switchyard`. */
  namespace?: string;
  /** The sandbox image. Default: the tag in `imageTagFile`. Without either, the tiers report themselves unavailable. */
  image?: string;
  /** Absolute path of the file holding the image tag (`npm run sandbox:image`). */
  imageTagFile?: string;
  /** Default `Never`: the image must already be on the node (a cluster without a registry, as the test one). */
  imagePullPolicy?: 'Never' | 'IfNotPresent' | 'Always';
  /**
   * Warm session pods this engine keeps ready to be claimed however quiet it is: the pool's floor. After a burst of
   * claims it keeps more (`demandWindowMs`). Default 2; 0: no warm pods (every session's pod is started for it).
   */
  min?: number;
  /** Most warm (or starting) session pods of this engine at once. Default 16. */
  max?: number;
  /** Most warm pods starting at once. Default: the engine host's CPU cores, at least 2 and at most 8. */
  starts?: number;
  /**
   * How long a burst of claims keeps the pool above its floor: it keeps `min` plus the most claims that came within
   * one pod start time during the last `demandWindowMs` (at most `max`). Default 60 000.
   */
  demandWindowMs?: number;
  /** Most session pods this engine holds for sessions at once. Default 16. */
  maxSessions?: number;
  /** How long a claim may take (a warm pod, else a new one started for it). Default 30 000. */
  acquireTimeoutMs?: number;
  /** Create → `Running` of one pod. Default 60 000. */
  podStartTimeoutMs?: number;
  /** The runner's greeting after its wake-up byte. Default 15 000. */
  runnerStartTimeoutMs?: number;
  /** A runner ping (the borrow health check, the claim's workspace identity). Default 2000. */
  healthCheckTimeoutMs?: number;
  /** After a session pod's runner died: how long the next use waits for the kubelet to restart it. Default 30 000. */
  runnerRestartTimeoutMs?: number;
  /** Time past a run's own timeout before a silent runner counts as hung. Default 3000. */
  runnerGraceMs?: number;
  /** Deadline of each REST call to the API server. Default 10 000. */
  apiTimeoutMs?: number;
  /** Deadline of an exec (workspace tar, kill) without its own. Default 60 000. */
  execTimeoutMs?: number;
  /** How often the warm pods are re-listed and refilled. Default 10 000. */
  reconcileIntervalMs?: number;
  /** RuntimeClass of the one-off pods (`gvisor`, `kata`…), when the cluster has one. */
  runtimeClassName?: string;
  /** `spec.nodeSelector` of every pod. */
  nodeSelector?: Record<string, string>;
  /** `spec.nodeName` of every pod: binds them without a scheduler (the test cluster has none). */
  nodeName?: string;
  /** The pods' `spec.hostname`. Default `sandbox`. */
  hostname?: string;
  /** Engine instance id (`<host>:<pid>:<ticks>:<instance>`). Default: this process's (`defaultEngineInstanceId`). */
  engineId?: string;
  /**
   * How operators set the options, named in refusals and in the cluster's failures (capacity, placement, the
   * kubeconfig and its context, the image and its pull policy, what pods ask their node for). Default the option's own
   * name (`kubernetes.max`, `kubernetes.namespace`).
   */
  settingNames?: Partial<Record<KubernetesSetting, string>>;
  limits?: { pooled?: Partial<KubernetesLimits>; container?: Partial<KubernetesLimits> };
}

export interface ResolvedKubernetesOptions {
  kubeconfigPath?: string;
  context?: string;
  namespace: string;
  image?: string;
  imageSource: 'option' | 'tag-file' | 'none';
  imagePullPolicy: 'Never' | 'IfNotPresent' | 'Always';
  min: number;
  max: number;
  starts: number;
  demandWindowMs: number;
  maxSessions: number;
  acquireTimeoutMs: number;
  podStartTimeoutMs: number;
  runnerStartTimeoutMs: number;
  healthCheckTimeoutMs: number;
  runnerRestartTimeoutMs: number;
  runnerGraceMs: number;
  apiTimeoutMs: number;
  execTimeoutMs: number;
  reconcileIntervalMs: number;
  runtimeClassName?: string;
  nodeSelector?: Record<string, string>;
  nodeName?: string;
  hostname: string;
  engineId: string;
  settingNames: Record<KubernetesSetting, string>;
  limits: { pooled: KubernetesLimits; container: KubernetesLimits };
}

/** The CPU each pod reserves on its node unless configured: a tenth of a core. */
export const DEFAULT_CPU_REQUEST = 0.1;

/**
 * Ranges of the Kubernetes tiers' own options the engine also sets; declared here only (the pool's capacity and the
 * limits every pod gets: `POOL_BOUNDS`, `CONTAINER_LIMIT_BOUNDS`). `cpuRequest` is also held to the pod's `cpus`.
 */
export const KUBERNETES_BOUNDS = {
  podStartTimeoutMs: { min: 1, max: 600_000 },
  cpuRequest: { min: 0.001 },
} as const satisfies Record<string, Bounds>;

export function defaultKubernetesLimits(overrides: Partial<KubernetesLimits> = {}): KubernetesLimits {
  const workspaceBytes = overrides.workspaceBytes ?? GiB;
  const cpus = overrides.cpus ?? 1;
  return {
    memoryBytes: 512 * MiB,
    cpus,
    cpuRequest: Math.min(DEFAULT_CPU_REQUEST, cpus),
    workspaceBytes,
    ephemeralStorageBytes: workspaceBytes + 128 * MiB,
    tmpBytes: 64 * MiB,
    openFiles: 256,
    fileSizeBytes: 64 * MiB,
    ...overrides,
  };
}

/** DNS-1123 label (namespace, hostname) and subdomain (node name, runtime class). */
const DNS_LABEL = /^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/;
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/;
const LABEL_KEY = /^([a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?\/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$/;
const LABEL_VALUE = /^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$/;

function imageFrom(options: KubernetesOptions): Pick<ResolvedKubernetesOptions, 'image' | 'imageSource'> {
  if (options.image !== undefined) return { image: options.image, imageSource: 'option' };
  if (options.imageTagFile === undefined) return { image: undefined, imageSource: 'none' };
  if (!path.isAbsolute(options.imageTagFile)) {
    throw new SandboxConfigError('kubernetes.imageTagFile', 'must be an absolute path');
  }
  const tag = readImageTag(options.imageTagFile);
  return tag === undefined
    ? { image: undefined, imageSource: 'none' }
    : { image: tag, imageSource: 'tag-file' };
}

/** Applies defaults and fails loudly, naming the option (`kubernetes.<name>`), on anything that cannot work. */
export function resolveKubernetesOptions(options: KubernetesOptions = {}): ResolvedKubernetesOptions {
  const resolved: ResolvedKubernetesOptions = {
    ...(options.kubeconfigPath !== undefined && { kubeconfigPath: options.kubeconfigPath }),
    ...(options.context !== undefined && { context: options.context }),
    namespace: options.namespace ?? 'switchyard',
    ...imageFrom(options),
    imagePullPolicy: options.imagePullPolicy ?? 'Never',
    min: options.min ?? 2,
    max: options.max ?? 16,
    starts: options.starts ?? defaultWarmStarts(),
    demandWindowMs: options.demandWindowMs ?? 60_000,
    maxSessions: options.maxSessions ?? 16,
    acquireTimeoutMs: options.acquireTimeoutMs ?? 30_000,
    podStartTimeoutMs: options.podStartTimeoutMs ?? 60_000,
    runnerStartTimeoutMs: options.runnerStartTimeoutMs ?? 15_000,
    healthCheckTimeoutMs: options.healthCheckTimeoutMs ?? 2000,
    runnerRestartTimeoutMs: options.runnerRestartTimeoutMs ?? 30_000,
    runnerGraceMs: options.runnerGraceMs ?? 3000,
    apiTimeoutMs: options.apiTimeoutMs ?? 10_000,
    execTimeoutMs: options.execTimeoutMs ?? 60_000,
    reconcileIntervalMs: options.reconcileIntervalMs ?? 10_000,
    ...(options.runtimeClassName !== undefined && { runtimeClassName: options.runtimeClassName }),
    ...(options.nodeSelector !== undefined && { nodeSelector: { ...options.nodeSelector } }),
    ...(options.nodeName !== undefined && { nodeName: options.nodeName }),
    hostname: options.hostname ?? 'sandbox',
    engineId: options.engineId ?? defaultEngineInstanceId(),
    settingNames: {
      min: 'kubernetes.min',
      max: 'kubernetes.max',
      maxSessions: 'kubernetes.maxSessions',
      acquireTimeoutMs: 'kubernetes.acquireTimeoutMs',
      namespace: 'kubernetes.namespace',
      nodeName: 'kubernetes.nodeName',
      nodeSelector: 'kubernetes.nodeSelector',
      podStartTimeoutMs: 'kubernetes.podStartTimeoutMs',
      kubeconfigPath: 'kubernetes.kubeconfigPath',
      context: 'kubernetes.context',
      image: 'kubernetes.image',
      imagePullPolicy: 'kubernetes.imagePullPolicy',
      cpuRequest: 'kubernetes.limits.*.cpuRequest',
      pooledMemoryBytes: 'kubernetes.limits.pooled.memoryBytes',
      containerMemoryBytes: 'kubernetes.limits.container.memoryBytes',
      workspaceBytes: 'kubernetes.limits.*.workspaceBytes',
      ...options.settingNames,
    },
    limits: {
      pooled: defaultKubernetesLimits(options.limits?.pooled),
      container: defaultKubernetesLimits(options.limits?.container),
    },
  };
  const integers: IntegerOption[] = [
    ...(['min', 'max', 'starts', 'demandWindowMs', 'maxSessions', 'acquireTimeoutMs'] as const).map(
      (name): IntegerOption => [name, resolved[name], POOL_BOUNDS[name].min, POOL_BOUNDS[name].max],
    ),
    [
      'podStartTimeoutMs',
      resolved.podStartTimeoutMs,
      KUBERNETES_BOUNDS.podStartTimeoutMs.min,
      KUBERNETES_BOUNDS.podStartTimeoutMs.max,
    ],
    ['runnerStartTimeoutMs', resolved.runnerStartTimeoutMs, 1, 600_000],
    ['healthCheckTimeoutMs', resolved.healthCheckTimeoutMs, 1, 600_000],
    ['runnerRestartTimeoutMs', resolved.runnerRestartTimeoutMs, 1, 600_000],
    ['runnerGraceMs', resolved.runnerGraceMs, 1, 600_000],
    ['apiTimeoutMs', resolved.apiTimeoutMs, 1, 600_000],
    ['execTimeoutMs', resolved.execTimeoutMs, 1, 3_600_000],
    ['reconcileIntervalMs', resolved.reconcileIntervalMs, 100, 2 ** 31 - 1],
  ];
  for (const tier of ['pooled', 'container'] as const) {
    const l = resolved.limits[tier];
    integers.push(
      [
        `limits.${tier}.memoryBytes`,
        l.memoryBytes,
        CONTAINER_LIMIT_BOUNDS.memoryBytes.min,
        Number.MAX_SAFE_INTEGER,
      ],
      [`limits.${tier}.workspaceBytes`, l.workspaceBytes, MiB, Number.MAX_SAFE_INTEGER],
      [`limits.${tier}.ephemeralStorageBytes`, l.ephemeralStorageBytes, MiB, Number.MAX_SAFE_INTEGER],
      [`limits.${tier}.tmpBytes`, l.tmpBytes, MiB, Number.MAX_SAFE_INTEGER],
      [`limits.${tier}.openFiles`, l.openFiles, 16, 1 << 20],
      [`limits.${tier}.fileSizeBytes`, l.fileSizeBytes, 1, Number.MAX_SAFE_INTEGER],
    );
  }
  checkIntegers(integers, 'kubernetes.');
  for (const tier of ['pooled', 'container'] as const) {
    const l = resolved.limits[tier];
    const { cpus } = CONTAINER_LIMIT_BOUNDS;
    if (typeof l.cpus !== 'number' || !(l.cpus >= cpus.min && l.cpus <= cpus.max)) {
      throw new SandboxConfigError(
        `kubernetes.limits.${tier}.cpus`,
        `must be a number from ${cpus.min} to ${cpus.max}, got ${String(l.cpus)}`,
      );
    }
    const { cpuRequest } = KUBERNETES_BOUNDS;
    if (typeof l.cpuRequest !== 'number' || !(l.cpuRequest >= cpuRequest.min && l.cpuRequest <= l.cpus)) {
      throw new SandboxConfigError(
        `kubernetes.limits.${tier}.cpuRequest`,
        `must be a number from ${cpuRequest.min} to cpus (${l.cpus}), got ${String(l.cpuRequest)}`,
      );
    }
    if (l.ephemeralStorageBytes <= l.workspaceBytes) {
      throw new SandboxConfigError(
        `kubernetes.limits.${tier}.ephemeralStorageBytes`,
        `must exceed workspaceBytes (${l.workspaceBytes}): it also holds the container's logs, and the pod is evicted past it`,
      );
    }
    if (l.tmpBytes + 8 * MiB >= l.memoryBytes) {
      throw new SandboxConfigError(
        `kubernetes.limits.${tier}.tmpBytes`,
        'must leave room in memoryBytes (/tmp is memory-backed)',
      );
    }
  }
  if (resolved.min > resolved.max) {
    throw new SandboxConfigError('kubernetes.min', `must not exceed kubernetes.max (${resolved.max})`);
  }
  if (!DNS_LABEL.test(resolved.namespace)) {
    throw new SandboxConfigError(
      'kubernetes.namespace',
      `not a namespace name: ${JSON.stringify(resolved.namespace)}`,
    );
  }
  if (!DNS_LABEL.test(resolved.hostname)) {
    throw new SandboxConfigError(
      'kubernetes.hostname',
      `not a DNS label: ${JSON.stringify(resolved.hostname)}`,
    );
  }
  if (resolved.image !== undefined && !/^[\w][\w.\-/:@]*$/.test(resolved.image)) {
    throw new SandboxConfigError(
      'kubernetes.image',
      `not an image reference: ${JSON.stringify(resolved.image)}`,
    );
  }
  if (!['Never', 'IfNotPresent', 'Always'].includes(resolved.imagePullPolicy)) {
    throw new SandboxConfigError('kubernetes.imagePullPolicy', 'must be Never, IfNotPresent or Always');
  }
  if (resolved.kubeconfigPath !== undefined && !path.isAbsolute(resolved.kubeconfigPath)) {
    throw new SandboxConfigError('kubernetes.kubeconfigPath', 'must be an absolute path');
  }
  for (const [option, value] of [
    ['nodeName', resolved.nodeName],
    ['runtimeClassName', resolved.runtimeClassName],
  ] as const) {
    if (value !== undefined && !DNS_SUBDOMAIN.test(value)) {
      throw new SandboxConfigError(`kubernetes.${option}`, `not a valid name: ${JSON.stringify(value)}`);
    }
  }
  for (const [key, value] of Object.entries(resolved.nodeSelector ?? {})) {
    if (!LABEL_KEY.test(key) || typeof value !== 'string' || !LABEL_VALUE.test(value)) {
      throw new SandboxConfigError(
        'kubernetes.nodeSelector',
        `not a label: ${JSON.stringify(key)}=${JSON.stringify(value)}`,
      );
    }
  }
  if (
    typeof resolved.engineId !== 'string' ||
    resolved.engineId.length === 0 ||
    resolved.engineId.length > 253
  ) {
    throw new SandboxConfigError(
      'kubernetes.engineId',
      'must be a non-empty string of at most 253 characters',
    );
  }
  return resolved;
}
