import type { Logger } from '@nestjs/common';
import { describeRights, missingRightsMessage, reviewRights } from './kube-access';
import type { KubeClient } from './kube-client';
import { KubeApiError, KubernetesSetupError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';

/** The namespace is not there: what to do about it. Shared by start-up, `/health` and a pod create answered 404. */
export function namespaceMissingMessage(options: ResolvedKubernetesOptions, server: string): string {
  return (
    `namespace ${options.namespace} does not exist in the cluster at ${server}: create it (with its default ` +
    `ServiceAccount) or set ${options.settingNames.namespace} to one that does`
  );
}

/** The server does not answer (no connection, no answer in time, a 5xx or 429): worth waiting for. */
export function isUnreachable(err: unknown): boolean {
  return err instanceof KubeApiError && err.kind === 'unavailable' && err.code !== 'KUBE_FORBIDDEN';
}

/**
 * The Kubernetes backend's configuration checked against the cluster it names, once at start-up: the API server
 * takes the engine's credentials, the namespace exists, and the account has every right the backend uses (one
 * `SelfSubjectAccessReview` each). A configuration that cannot work stops the engine (`KubernetesSetupError`, naming
 * the setting); an API server that does not answer does not: the engine starts, `/health` says why it is not ready,
 * and the same checks run with every readiness probe until the server answers (`KubeAvailability`), so an outage of
 * the cluster never keeps an engine down.
 */
export class KubeSetupCheck {
  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly logger: Logger,
  ) {}

  /** `checked`, or `deferred` when the server did not answer. Rejects with `KubernetesSetupError`. */
  async run(): Promise<'checked' | 'deferred'> {
    try {
      return await this.check();
    } catch (err) {
      if (!isUnreachable(err)) throw err;
      this.logger.warn(
        `${(err as Error).message}. Starting anyway: /health is not ready and sessions are answered 503 until it ` +
          `answers; the namespace and the account's rights are checked then`,
      );
      return 'deferred';
    }
  }

  private async check(): Promise<'checked'> {
    const o = this.options;
    const names = o.settingNames;
    let version: string;
    try {
      version = await this.client.ping();
    } catch (err) {
      // Only the credentials are refused on /version, which every authenticated user may read.
      if (err instanceof KubeApiError && err.code === 'KUBE_FORBIDDEN') {
        throw new KubernetesSetupError('kubeconfigPath', names.kubeconfigPath, err.message, { cause: err });
      }
      throw err;
    }
    let exists: boolean | undefined;
    try {
      exists = await this.client.namespaceExists();
    } catch (err) {
      if (!(err instanceof KubeApiError && err.code === 'KUBE_FORBIDDEN')) throw err;
      this.logger.warn(
        `cannot tell whether namespace ${o.namespace} exists (${err.message}); a pod create will say`,
      );
    }
    if (exists === false) {
      throw new KubernetesSetupError(
        'namespace',
        names.namespace,
        namespaceMissingMessage(o, this.client.server),
      );
    }
    const review = await reviewRights(this.client);
    if (review.unknown !== undefined) {
      this.logger.warn(`cannot review the engine's rights in the cluster (${review.unknown}); not checked`);
    }
    if (review.missing.length > 0) {
      // A Role grants reading its own namespace: one that cannot be read may be one that does not exist.
      const unread =
        exists === undefined ? ` (it may not read namespace ${o.namespace} either: does it exist?)` : '';
      throw new KubernetesSetupError(
        'kubeconfigPath',
        names.kubeconfigPath,
        `${missingRightsMessage(review, this.client, o)}${unread}`,
      );
    }
    if (review.missingOptional.length > 0) {
      this.logger.warn(
        `the engine's Kubernetes account may not ${describeRights(review.missingOptional)}: going on without`,
      );
    }
    this.logger.log(
      `Kubernetes API server ${this.client.server} (${version}): namespace ${o.namespace} is there` +
        `${review.unknown === undefined ? `, and ${review.user ?? 'the engine'} may do what the backend does` : ''}`,
    );
    return 'checked';
  }
}
