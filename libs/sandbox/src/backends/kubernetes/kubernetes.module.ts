import { Module, type DynamicModule } from '@nestjs/common';
import { ClientNodeKubeClient } from './client-node-kube-client';
import type { KubeClient } from './kube-client';
import { KubeApiError, KubernetesSetupError } from './kubernetes.errors';
import {
  KUBE_CLIENT,
  KUBERNETES_CHECKED,
  KUBERNETES_ONE_OFF_TIER,
  KUBERNETES_OPTIONS,
  KUBERNETES_POOLED_TIER,
  KUBERNETES_SESSION_PODS,
} from './kubernetes.constants';
import {
  resolveKubernetesOptions,
  type KubernetesOptions,
  type ResolvedKubernetesOptions,
} from './kubernetes.options';
import { KubernetesSandbox } from './kubernetes-sandbox';
import { KubernetesOneOffTier, KubernetesPooledTier } from './kubernetes-tiers';

/**
 * The Kubernetes backend of the container tiers: options, the `KubeClient`, the backend (`KubernetesSandbox`: warm
 * and session pods, one-off runs, reaper, lifecycle), `SessionPods` for the engine's file API and checkpoints, and
 * both tiers under tokens of their own. Register the tiers with the sandbox module (they replace the Docker `pooled`
 * and `container` tiers: tier names are unique):
 *
 * ```ts
 * SandboxModule.forRoot(sandboxOptions, {
 *   imports: [KubernetesSandboxModule.forRoot({ kubeconfigPath, namespace: 'switchyard', min: 2 })],
 *   tiers: [KubernetesPooledTier, KubernetesOneOffTier],
 * });
 * ```
 *
 * `client` replaces the adapter (tests pass a fake). The module checks the configuration against the cluster while
 * the application is created (`KubernetesSandbox.validate`): a kubeconfig that cannot be read, a namespace that does
 * not exist or rights the account lacks reject with `KubernetesSetupError`, naming the setting.
 */
@Module({})
export class KubernetesSandboxModule {
  static forRoot(options: KubernetesOptions = {}, client?: KubeClient): DynamicModule {
    const resolved = resolveKubernetesOptions(options);
    return {
      module: KubernetesSandboxModule,
      // Global: the engine's file API and checkpoints reach the session pods too, not only the sandbox module's tiers.
      global: true,
      providers: [
        { provide: KUBERNETES_OPTIONS, useValue: resolved },
        {
          provide: KUBE_CLIENT,
          useFactory: (o: ResolvedKubernetesOptions): KubeClient => client ?? adapter(o),
          inject: [KUBERNETES_OPTIONS],
        },
        KubernetesSandbox,
        {
          provide: KUBERNETES_CHECKED,
          useFactory: async (b: KubernetesSandbox): Promise<true> => {
            await b.validate();
            return true;
          },
          inject: [KubernetesSandbox],
        },
        {
          provide: KUBERNETES_SESSION_PODS,
          useFactory: (b: KubernetesSandbox) => b.sessions,
          inject: [KubernetesSandbox],
        },
        {
          provide: KUBERNETES_POOLED_TIER,
          useFactory: (b: KubernetesSandbox) => new KubernetesPooledTier(b),
          inject: [KubernetesSandbox],
        },
        {
          provide: KUBERNETES_ONE_OFF_TIER,
          useFactory: (b: KubernetesSandbox) => new KubernetesOneOffTier(b),
          inject: [KubernetesSandbox],
        },
      ],
      exports: [
        KUBERNETES_OPTIONS,
        KUBE_CLIENT,
        KubernetesSandbox,
        KUBERNETES_SESSION_PODS,
        KUBERNETES_POOLED_TIER,
        KUBERNETES_ONE_OFF_TIER,
      ],
    };
  }
}

/** The client library's adapter; a kubeconfig it cannot use is the operator's setting at fault. */
function adapter(o: ResolvedKubernetesOptions): KubeClient {
  try {
    return new ClientNodeKubeClient({
      ...(o.kubeconfigPath !== undefined && { kubeconfigPath: o.kubeconfigPath }),
      ...(o.context !== undefined && { context: o.context }),
      namespace: o.namespace,
      apiTimeoutMs: o.apiTimeoutMs,
      execTimeoutMs: o.execTimeoutMs,
      settingNames: { kubeconfigPath: o.settingNames.kubeconfigPath, context: o.settingNames.context },
    });
  } catch (err) {
    if (!(err instanceof KubeApiError && err.code === 'KUBE_CONFIG')) throw err;
    const setting = o.settingNames.kubeconfigPath;
    throw new KubernetesSetupError('kubeconfigPath', setting, err.message, { cause: err });
  }
}
