import type { Clock } from '@switchyard/common';
import type { TierAvailability } from '../../core/sandbox.types';
import { missingRightsMessage, reviewRights, type RightsReview } from './kube-access';
import type { KubeClient } from './kube-client';
import type { KubeNode } from './kube-types';
import { KubeApiError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import { namespaceMissingMessage } from './kube-setup-check';

/** A positive answer is reused this long (the manager asks before every action); a negative one never. */
const AVAILABLE_TTL_MS = 2000;
/**
 * Past its TTL, a positive answer younger than this still answers while a probe asks the cluster again in the
 * background (its answer is the next caller's): an action never waits on the API server for it. An older one waits.
 */
const AVAILABLE_STALE_MS = 10_000;
/** The account's rights, once all there, are reviewed again this often (someone may take them away). */
const RIGHTS_TTL_MS = 60_000;

/**
 * The image reference as the kubelet reports it in `status.images`: registry and tag made explicit
 * (`switchyard/sandbox:x` → `docker.io/switchyard/sandbox:x`, `python` → `docker.io/library/python:latest`).
 */
export function normalizeImageRef(ref: string): string {
  let name = ref;
  let suffix = '';
  const at = name.indexOf('@');
  if (at >= 0) {
    suffix = name.slice(at);
    name = name.slice(0, at);
  } else {
    const colon = name.lastIndexOf(':');
    if (colon > name.lastIndexOf('/')) {
      suffix = name.slice(colon);
      name = name.slice(0, colon);
    } else suffix = ':latest';
  }
  const first = name.split('/')[0] ?? '';
  const hasRegistry =
    name.includes('/') && (first.includes('.') || first.includes(':') || first === 'localhost');
  if (!hasRegistry) name = name.includes('/') ? `docker.io/${name}` : `docker.io/library/${name}`;
  return `${name}${suffix}`;
}

/**
 * Whether the Kubernetes tiers can run anything: an image configured, the API server answering and taking the
 * engine's credentials, the namespace there, the account's rights (`ENGINE_RIGHTS`), a Ready node to run on (the
 * configured `nodeName`, or one matching `nodeSelector`) and, with `imagePullPolicy: Never`, the image present on it.
 * Without permission to read the namespace or list nodes, those checks are skipped (said in `details`).
 */
export class KubeAvailability {
  private cached?: { at: number; result: TierAvailability };
  private rights?: { at: number; review: RightsReview };
  private refreshing?: Promise<TierAvailability>;

  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly clock: Clock,
  ) {}

  async current(): Promise<TierAvailability> {
    const cached = this.cached;
    const age = cached ? this.clock.monotonic() - cached.at : Infinity;
    if (cached && age < AVAILABLE_TTL_MS) return cached.result;
    const refresh = this.refresh();
    if (cached && age < AVAILABLE_STALE_MS) return cached.result;
    return refresh;
  }

  /** The next call asks the cluster again, the account's rights included. */
  forget(): void {
    this.cached = undefined;
    this.rights = undefined;
    this.refreshing = undefined;
  }

  /** One probe at a time; its answer replaces the cached one (a negative one clears it). Never rejects. */
  private refresh(): Promise<TierAvailability> {
    const refreshing = (this.refreshing ??= this.probe()
      .catch((err: unknown) => this.failed(err))
      .then((result) => {
        if (this.refreshing === refreshing) {
          this.cached = result.available ? { at: this.clock.monotonic(), result } : undefined;
        }
        return result;
      })
      .finally(() => {
        if (this.refreshing === refreshing) this.refreshing = undefined;
      }));
    return refreshing;
  }

  private async probe(): Promise<TierAvailability> {
    const o = this.options;
    if (!o.image) {
      return {
        available: false,
        code: 'SANDBOX_IMAGE_MISSING',
        reason:
          `no sandbox image configured for the Kubernetes tiers: set ${o.settingNames.image}, or build it ` +
          '(`npm run sandbox:image` writes its tag)',
      };
    }
    let version: string;
    try {
      version = await this.client.ping();
    } catch (err) {
      return this.failed(err);
    }
    const details: Record<string, unknown> = { server: version, namespace: o.namespace, image: o.image };
    try {
      if (!(await this.client.namespaceExists())) {
        return {
          available: false,
          code: 'KUBERNETES_NAMESPACE_MISSING',
          reason: namespaceMissingMessage(o, this.client.server),
        };
      }
    } catch (err) {
      if (!(err instanceof KubeApiError && err.code === 'KUBE_FORBIDDEN')) return this.failed(err);
      details.namespaceExists = 'unknown: no permission to get the namespace';
    }
    let rights: RightsReview;
    try {
      rights = await this.reviewRights();
    } catch (err) {
      return this.failed(err);
    }
    if (rights.missing.length > 0) {
      return {
        available: false,
        code: 'KUBERNETES_FORBIDDEN',
        reason: missingRightsMessage(rights, this.client, o),
        details,
      };
    }
    if (rights.unknown !== undefined) details.rights = `unknown: ${rights.unknown}`;
    let nodes: KubeNode[];
    try {
      nodes = await this.client.nodes();
    } catch (err) {
      if (err instanceof KubeApiError && err.code === 'KUBE_FORBIDDEN') {
        details.nodes =
          'unknown: no permission to list nodes (node readiness and image presence not checked)';
        return { available: true, details };
      }
      return this.failed(err);
    }
    const candidates = nodes.filter(
      (n) =>
        (o.nodeName === undefined || n.name === o.nodeName) &&
        Object.entries(o.nodeSelector ?? {}).every(([k, v]) => n.labels[k] === v),
    );
    const ready = candidates.filter((n) => n.ready && !n.unschedulable);
    details.readyNodes = ready.map((n) => n.name);
    if (ready.length === 0) {
      const matching = o.nodeSelector ? ` matching ${o.settingNames.nodeSelector}` : '';
      const where = o.nodeName
        ? `node ${o.nodeName} (${o.settingNames.nodeName})${matching}`
        : `node${matching}`;
      return {
        available: false,
        code: 'KUBERNETES_NO_READY_NODE',
        reason: `no Ready ${where} to run sandbox pods on (${nodes.length} node(s) in the cluster)`,
        details,
      };
    }
    if (o.imagePullPolicy === 'Never') {
      const wanted = normalizeImageRef(o.image);
      const withImage = ready.filter((n) =>
        n.images.some((i) => i === wanted || normalizeImageRef(i) === wanted),
      );
      if (withImage.length === 0) {
        return {
          available: false,
          code: 'SANDBOX_IMAGE_MISSING',
          reason:
            `image ${o.image} is on no Ready node and ${o.settingNames.imagePullPolicy} is Never: import it into the ` +
            `nodes' container runtime (scripts/k8s.sh does for the sandbox image), or set ${o.settingNames.image} to ` +
            `an image they have`,
          details,
        };
      }
    }
    return { available: true, details };
  }

  /** The account's rights: reviewed again while any is missing, else every `RIGHTS_TTL_MS`. */
  private async reviewRights(): Promise<RightsReview> {
    const known = this.rights;
    const now = this.clock.monotonic();
    if (known && known.review.missing.length === 0 && now - known.at < RIGHTS_TTL_MS) return known.review;
    const review = await reviewRights(this.client);
    this.rights = { at: now, review };
    return review;
  }

  /** A call of the probe failed: the server does not answer, refuses the credentials, or answered an error. */
  private failed(err: unknown): TierAvailability {
    const forbidden = err instanceof KubeApiError && err.code === 'KUBE_FORBIDDEN';
    return {
      available: false,
      code: forbidden ? 'KUBERNETES_FORBIDDEN' : 'KUBERNETES_UNAVAILABLE',
      reason: (err as Error).message,
    };
  }
}
