import type { KubeClient } from './kube-client';
import type { AccessCheck } from './kube-types';
import { KubeApiError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';

/** A right the backend uses: what for, and whether it works at all without it. */
export interface EngineRight extends AccessCheck {
  /** Without it no session gets a pod: start-up refuses to go on, `/health` is not ready. */
  required: boolean;
  /** What the backend does with it, for messages. */
  use: string;
}

/**
 * Every right the Kubernetes backend uses, in its namespace unless cluster-scoped. An attach or exec over a WebSocket
 * is an HTTP `GET`, authorized as `get` on the subresource; Kubernetes 1.35 checks `create` on it as well (as it
 * always did for SPDY), so the engine needs both. The optional ones only make the backend more careful: without them
 * it warns and goes on.
 */
export const ENGINE_RIGHTS: readonly EngineRight[] = [
  { verb: 'create', resource: 'pods', required: true, use: 'session and one-off pods' },
  { verb: 'get', resource: 'pods', required: true, use: 'waiting for a pod to run' },
  { verb: 'list', resource: 'pods', required: true, use: 'warm pods, leftovers of dead engines' },
  { verb: 'patch', resource: 'pods', required: true, use: 'claiming a warm pod' },
  { verb: 'delete', resource: 'pods', required: true, use: 'ending sessions and runs' },
  { verb: 'get', resource: 'pods', subresource: 'attach', required: true, use: "the runner's protocol" },
  { verb: 'create', resource: 'pods', subresource: 'attach', required: true, use: "the runner's protocol" },
  {
    verb: 'get',
    resource: 'pods',
    subresource: 'exec',
    required: true,
    use: 'file transfer, workspace copies',
  },
  {
    verb: 'create',
    resource: 'pods',
    subresource: 'exec',
    required: true,
    use: 'file transfer, workspace copies',
  },
  {
    verb: 'get',
    resource: 'networkpolicies',
    group: 'networking.k8s.io',
    required: false,
    use: 'the deny-all NetworkPolicy',
  },
  {
    verb: 'create',
    resource: 'networkpolicies',
    group: 'networking.k8s.io',
    required: false,
    use: 'the deny-all NetworkPolicy',
  },
  { verb: 'get', resource: 'namespaces', required: false, use: 'readiness: the namespace exists' },
  {
    verb: 'list',
    resource: 'nodes',
    clusterScoped: true,
    required: false,
    use: 'readiness: a Ready node, the image on it',
  },
];

/** What the API server said about the engine's rights. */
export interface RightsReview {
  /** The user the server takes the engine for, when it says. */
  user?: string;
  /** Required rights the account lacks. */
  missing: EngineRight[];
  /** Optional rights it lacks. */
  missingOptional: EngineRight[];
  /** Set when the server refused to answer access reviews at all (their result is then unknown, not negative). */
  unknown?: string;
}

/** `create pods/exec`. */
export function describeRight(right: AccessCheck): string {
  return `${right.verb} ${right.resource}${right.subresource ? `/${right.subresource}` : ''}`;
}

/**
 * Asks the API server, one `SelfSubjectAccessReview` per right (all at once), which of `ENGINE_RIGHTS` the engine's
 * account lacks. Rejects when the server does not answer; a refusal to review (403) is an unknown answer, not a
 * missing right.
 */
export async function reviewRights(
  client: KubeClient,
  rights: readonly EngineRight[] = ENGINE_RIGHTS,
): Promise<RightsReview> {
  const namespace = client.namespace;
  const checks = rights.map((r) =>
    client.reviewAccess(r.resource === 'namespaces' ? { ...r, name: namespace } : r),
  );
  let answers;
  try {
    answers = await Promise.all(checks);
  } catch (err) {
    if (err instanceof KubeApiError && err.code === 'KUBE_FORBIDDEN')
      return { missing: [], missingOptional: [], unknown: err.message };
    throw err;
  }
  const user = await client.whoAmI().catch(() => undefined);
  const lacking = rights.filter((_, i) => !answers[i]?.allowed);
  return {
    ...(user !== undefined && { user }),
    missing: lacking.filter((r) => r.required),
    missingOptional: lacking.filter((r) => !r.required),
  };
}

/**
 * Rights grouped by what they are on, in `ENGINE_RIGHTS`' order: `create, patch pods (session and one-off pods,
 * claiming a warm pod); get, create pods/exec (file transfer, workspace copies)`.
 */
export function describeRights(rights: readonly EngineRight[]): string {
  const groups = new Map<string, { verbs: string[]; uses: string[] }>();
  for (const r of rights) {
    const on = `${r.resource}${r.subresource ? `/${r.subresource}` : ''}`;
    const g = groups.get(on) ?? { verbs: [], uses: [] };
    g.verbs.push(r.verb);
    if (!g.uses.includes(r.use)) g.uses.push(r.use);
    groups.set(on, g);
  }
  return [...groups].map(([on, g]) => `${g.verbs.join(', ')} ${on} (${g.uses.join(', ')})`).join('; ');
}

/**
 * The message for required rights missing: which account, which rights in which namespace and what for, and the
 * settings to change.
 */
export function missingRightsMessage(
  review: RightsReview,
  client: KubeClient,
  options: ResolvedKubernetesOptions,
): string {
  const names = options.settingNames;
  const who = review.user ? `${review.user}, from ${client.source}` : `from ${client.source}`;
  return (
    `the engine's Kubernetes account (${who}) may not ${describeRights(review.missing)} in namespace ` +
    `${options.namespace}: grant them (docs/kubernetes.md, "When the cluster is not right", has a Role), set ` +
    `${names.kubeconfigPath} (or ${names.context}) to an account that has them, or ${names.namespace} to a ` +
    `namespace where it does`
  );
}
