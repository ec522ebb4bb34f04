import * as path from 'node:path';
import {
  ContainerModule,
  ContainerTier,
  DockerModule,
  ImageRootsModule,
  KubernetesOneOffTier,
  KubernetesPooledTier,
  KubernetesSandboxModule,
  KubernetesSetupError,
  PooledTier,
  PooledTierModule,
  type SandboxTierExtensions,
} from '@switchyard/sandbox';
import { ConfigError } from './platform/config/config-error';
import type { EngineConfig } from './platform/config/engine-config';

/**
 * A start-up failure of the Kubernetes backend (its configuration cannot work with the cluster: a kubeconfig that
 * cannot be read, credentials refused, a namespace that does not exist, rights missing) as a `ConfigError` naming the
 * variable; others unchanged.
 */
export function kubernetesStartupError(error: unknown): unknown {
  if (!(error instanceof KubernetesSetupError)) return error;
  return new ConfigError([{ variable: error.variable, message: error.message }]);
}

/**
 * The container tiers (`pooled`, `container`) of the configured backend. Docker: containers on DOCKER_HOST sharing
 * this host's workspace directories. Kubernetes: a pod per session holding its workspace, and a pod per high-risk
 * action (the Docker client stays, for the template registry's image checks).
 */
export function containerTiers(
  config: EngineConfig,
  engineInstanceId: string,
  readOnlyBinds: string[] = [],
): SandboxTierExtensions {
  const sb = config.sandbox;
  // The subprocess tier runs the sandbox image's root (exported from Docker on both backends), not the host's /usr.
  // Beside the image tag, not in the data dir: every engine of this checkout shares one root per image.
  const imageRoots = ImageRootsModule.forRoot({
    dir: path.join(path.dirname(sb.imageTagFile), 'rootfs'),
    ...(sb.image !== undefined && { image: sb.image }),
    imageTagFile: sb.imageTagFile,
  });
  if (config.kubernetes.backend === 'kubernetes') {
    const k8s = config.kubernetes;
    const limits = (t: typeof sb.pooled) => ({
      memoryBytes: t.memoryBytes,
      cpus: t.nanoCpus / 1e9,
      cpuRequest: Math.min(k8s.cpuRequest, t.nanoCpus / 1e9),
      workspaceBytes: config.workspace.maxWorkspaceBytes,
    });
    return {
      imports: [
        DockerModule.forRoot({ host: sb.dockerHost }),
        imageRoots,
        KubernetesSandboxModule.forRoot({
          ...(k8s.kubeconfigPath !== undefined && { kubeconfigPath: k8s.kubeconfigPath }),
          ...(k8s.context !== undefined && { context: k8s.context }),
          namespace: k8s.namespace,
          ...(sb.image !== undefined && { image: sb.image }),
          imageTagFile: sb.imageTagFile,
          imagePullPolicy: k8s.imagePullPolicy,
          min: sb.pool.min,
          max: sb.pool.max,
          ...(sb.pool.starts !== undefined && { starts: sb.pool.starts }),
          demandWindowMs: sb.pool.demandWindowMs,
          maxSessions: sb.pool.maxSessions,
          acquireTimeoutMs: Math.max(sb.pool.acquireTimeoutMs, 30_000),
          podStartTimeoutMs: k8s.podStartTimeoutMs,
          ...(k8s.runtimeClassName !== undefined && { runtimeClassName: k8s.runtimeClassName }),
          ...(k8s.nodeSelector !== undefined && { nodeSelector: k8s.nodeSelector }),
          ...(k8s.nodeName !== undefined && { nodeName: k8s.nodeName }),
          engineId: engineInstanceId,
          settingNames: {
            min: 'SWITCHYARD_POOL_MIN',
            max: 'SWITCHYARD_POOL_MAX',
            maxSessions: 'SWITCHYARD_POOL_MAX_SESSIONS',
            acquireTimeoutMs: 'SWITCHYARD_POOL_ACQUIRE_TIMEOUT_MS',
            namespace: 'SWITCHYARD_K8S_NAMESPACE',
            nodeName: 'SWITCHYARD_K8S_NODE_NAME',
            nodeSelector: 'SWITCHYARD_K8S_NODE_SELECTOR',
            podStartTimeoutMs: 'SWITCHYARD_K8S_POD_START_TIMEOUT_MS',
            kubeconfigPath: 'KUBECONFIG',
            context: 'SWITCHYARD_K8S_CONTEXT',
            image: 'SWITCHYARD_SANDBOX_IMAGE',
            imagePullPolicy: 'SWITCHYARD_K8S_IMAGE_PULL_POLICY',
            cpuRequest: 'SWITCHYARD_K8S_CPU_REQUEST',
            pooledMemoryBytes: 'SWITCHYARD_POOLED_MEMORY_BYTES',
            containerMemoryBytes: 'SWITCHYARD_CONTAINER_MEMORY_BYTES',
            workspaceBytes: 'SWITCHYARD_MAX_WORKSPACE_BYTES',
          },
          limits: { pooled: limits(sb.pooled), container: limits(sb.container) },
        }),
      ],
      tiers: [KubernetesPooledTier, KubernetesOneOffTier],
    };
  }
  return {
    // One Docker client (imported by ContainerModule, from DOCKER_HOST as dockerode reads it) shared by
    // both container tiers.
    imports: [
      ContainerModule.forRoot(
        {
          image: sb.image,
          imageTagFile: sb.imageTagFile,
          engineInstanceId,
          runtime: sb.containerRuntime,
          runtimeSetting: 'SWITCHYARD_CONTAINER_RUNTIME',
          ahead: sb.containerAhead,
          limits: {
            memoryBytes: sb.container.memoryBytes,
            nanoCpus: sb.container.nanoCpus,
            pids: sb.container.pids,
          },
          readOnlyBinds,
          // In the data dir, as the sandboxes' CA files: the Docker daemon sees it at the same path (the workspaces
          // are there), also when the engine itself runs in a container.
          hostsDir: path.join(config.dataDir, 'sandbox-etc'),
        },
        { host: sb.dockerHost },
      ),
      imageRoots,
      PooledTierModule.forRoot(
        {
          image: sb.image,
          imageTagFile: sb.imageTagFile,
          engineId: engineInstanceId,
          ...sb.pool,
          settingNames: {
            min: 'SWITCHYARD_POOL_MIN',
            max: 'SWITCHYARD_POOL_MAX',
            maxSessions: 'SWITCHYARD_POOL_MAX_SESSIONS',
            acquireTimeoutMs: 'SWITCHYARD_POOL_ACQUIRE_TIMEOUT_MS',
          },
          limits: {
            memoryBytes: sb.pooled.memoryBytes,
            nanoCpus: sb.pooled.nanoCpus,
            pids: sb.pooled.pids,
          },
          readOnlyBinds,
          hostsDir: path.join(config.dataDir, 'sandbox-etc'),
        },
        false,
      ),
    ],
    tiers: [ContainerTier, PooledTier],
  };
}
