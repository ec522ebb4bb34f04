import { CONTAINER_LIMIT_BOUNDS, KUBERNETES_BOUNDS } from '@switchyard/sandbox';
import { IsIn, IsOptional, Matches } from 'class-validator';
import * as path from 'node:path';
import { configFailure } from './config-error';
import { DecimalVar, IntVar, ListVar } from './env-parsing';

export const SANDBOX_BACKENDS = ['docker', 'kubernetes'] as const;
export type SandboxBackend = (typeof SANDBOX_BACKENDS)[number];

/** Where the container tiers run: the local Docker engine, or a Kubernetes cluster. */
export class KubernetesEnv {
  /**
   * `docker` (default): containers on DOCKER_HOST, workspaces on this host. `kubernetes`: every session gets a pod of
   * its own that holds its workspace; its code, kernels and processes run there and high-risk code in a pod per action.
   */
  @IsOptional()
  @IsIn(SANDBOX_BACKENDS)
  SWITCHYARD_SANDBOX_BACKEND: SandboxBackend = 'docker';

  /**
   * The cluster's kubeconfig (as kubectl reads it). Unset: the in-cluster configuration of the engine's own pod. At
   * start-up a file that cannot be read, credentials the API server refuses, or an account without the rights the
   * backend uses stop the engine (exit 78 naming this variable); an API server that does not answer does not.
   */
  @IsOptional()
  @Matches(/^[^\0]+$/, { message: 'must be a file path' })
  KUBECONFIG?: string = undefined;

  /** A context of the kubeconfig other than its current one. */
  @IsOptional()
  @Matches(/^[^\0]+$/, { message: 'must be a context name' })
  SWITCHYARD_K8S_CONTEXT?: string = undefined;

  /**
   * The namespace of every sandbox pod; it must exist, with its `default` ServiceAccount (checked at start-up: exit 78
   * naming this variable).
   */
  @IsOptional()
  @Matches(/^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$/, { message: 'must be a namespace name (DNS label)' })
  SWITCHYARD_K8S_NAMESPACE = 'switchyard';

  /** RuntimeClass of the one-off pods (e.g. `gvisor`), when the cluster has one. Unset: the node's default runtime. */
  @IsOptional()
  @Matches(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, { message: 'must be a RuntimeClass name' })
  SWITCHYARD_K8S_RUNTIME_CLASS?: string = undefined;

  /** `key=value` pairs every sandbox pod's `nodeSelector` gets. */
  @ListVar()
  SWITCHYARD_K8S_NODE_SELECTOR: string[] = [];

  /**
   * Binds every pod to this node (`spec.nodeName`), past the scheduler: for clusters without one. Unset: the cluster's
   * scheduler places the pods (the test cluster has one).
   */
  @IsOptional()
  @Matches(/^[a-z0-9]([-a-z0-9.]{0,251}[a-z0-9])?$/, { message: 'must be a node name' })
  SWITCHYARD_K8S_NODE_NAME?: string = undefined;

  /**
   * CPUs each sandbox pod requests (reserves on its node); its limit stays SWITCHYARD_POOLED_CPUS /
   * SWITCHYARD_CONTAINER_CPUS. Low by default so idle warm pods do not fill a node on paper; capped at the limit.
   */
  @DecimalVar(KUBERNETES_BOUNDS.cpuRequest.min, CONTAINER_LIMIT_BOUNDS.cpus.max)
  SWITCHYARD_K8S_CPU_REQUEST = 0.1;

  /**
   * How long a sandbox pod may take from its creation to a running runner; past it the pod is deleted and the request
   * answered 503 `POD_START_TIMEOUT`, saying why (no node fits it, no scheduler bound it, a node missing or not Ready).
   * An image the node cannot have is answered at once (`SANDBOX_IMAGE_MISSING`).
   */
  @IntVar(1000, KUBERNETES_BOUNDS.podStartTimeoutMs.max)
  SWITCHYARD_K8S_POD_START_TIMEOUT_MS = 60_000;

  /** `Never` (default: the image must be on the nodes), `IfNotPresent` or `Always` (a registry the nodes reach). */
  @IsOptional()
  @IsIn(['Never', 'IfNotPresent', 'Always'])
  SWITCHYARD_K8S_IMAGE_PULL_POLICY: 'Never' | 'IfNotPresent' | 'Always' = 'Never';
}

export interface KubernetesConfig {
  backend: SandboxBackend;
  /** The workspace tool the file API runs in a session's pod (`npm run build` writes it). */
  workspaceTool: string;
  /** The file transfer API's program in the pod (streamed reads, writes and tars; `npm run build` copies it). */
  workspaceTransfer: string;
  kubeconfigPath?: string;
  context?: string;
  namespace: string;
  runtimeClassName?: string;
  nodeSelector?: Record<string, string>;
  nodeName?: string;
  imagePullPolicy: 'Never' | 'IfNotPresent' | 'Always';
  cpuRequest: number;
  podStartTimeoutMs: number;
}

/** Relative paths are taken from `cwd`. */
export function kubernetesConfig(env: KubernetesEnv, cwd: string): KubernetesConfig {
  const selector: Record<string, string> = {};
  for (const pair of env.SWITCHYARD_K8S_NODE_SELECTOR) {
    const [key, value, ...rest] = pair.split('=');
    if (!key || value === undefined || rest.length > 0) {
      configFailure('SWITCHYARD_K8S_NODE_SELECTOR', `"${pair}" is not key=value`);
    }
    selector[key.trim()] = value.trim();
  }
  return {
    backend: env.SWITCHYARD_SANDBOX_BACKEND,
    workspaceTool: path.resolve(cwd, 'dist', 'pod', 'workspace-tool.js'),
    workspaceTransfer: path.resolve(cwd, 'dist', 'pod', 'file-transfer.py'),
    ...(env.KUBECONFIG && { kubeconfigPath: path.resolve(cwd, env.KUBECONFIG) }),
    ...(env.SWITCHYARD_K8S_CONTEXT && { context: env.SWITCHYARD_K8S_CONTEXT }),
    namespace: env.SWITCHYARD_K8S_NAMESPACE,
    ...(env.SWITCHYARD_K8S_RUNTIME_CLASS && { runtimeClassName: env.SWITCHYARD_K8S_RUNTIME_CLASS }),
    ...(Object.keys(selector).length > 0 && { nodeSelector: selector }),
    ...(env.SWITCHYARD_K8S_NODE_NAME && { nodeName: env.SWITCHYARD_K8S_NODE_NAME }),
    imagePullPolicy: env.SWITCHYARD_K8S_IMAGE_PULL_POLICY,
    cpuRequest: env.SWITCHYARD_K8S_CPU_REQUEST,
    podStartTimeoutMs: env.SWITCHYARD_K8S_POD_START_TIMEOUT_MS,
  };
}
