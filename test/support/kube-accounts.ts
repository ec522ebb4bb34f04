/**
 * Accounts and kubeconfigs of the test cluster that are not the admin's: a ServiceAccount bound to a Role of chosen
 * rules, its token from the TokenRequest API, written into a kubeconfig of its own; and kubeconfigs naming another
 * server or a token the cluster does not know. For tests of how the engine meets a cluster that is not right.
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import * as k8s from '@kubernetes/client-node';
import { TEST_KUBECONFIG, TEST_NAMESPACE } from './sandbox-backends';

export type RoleRule = k8s.V1PolicyRule;

/** Every right the Kubernetes backend uses in its namespace (docs/kubernetes.md has the same Role). */
export const ENGINE_ROLE_RULES: RoleRule[] = [
  { apiGroups: [''], resources: ['pods'], verbs: ['create', 'get', 'list', 'patch', 'delete'] },
  { apiGroups: [''], resources: ['pods/attach', 'pods/exec'], verbs: ['get', 'create'] },
  { apiGroups: ['networking.k8s.io'], resources: ['networkpolicies'], verbs: ['get', 'create'] },
  { apiGroups: [''], resources: ['namespaces'], verbs: ['get'] },
];

function admin(): k8s.KubeConfig {
  const kc = new k8s.KubeConfig();
  kc.loadFromFile(TEST_KUBECONFIG);
  return kc;
}

const dir = (() => {
  let made: string | undefined;
  return () => (made ??= mkdtempSync(path.join(os.tmpdir(), 'switchyard-kubeconfigs-')));
})();

/** The admin kubeconfig with its server or user changed, written to a file of its own. */
export function kubeconfigWith(change: { server?: string; token?: string; name: string }): string {
  const kc = admin();
  const cluster = kc.getCurrentCluster()!;
  const user = kc.getCurrentUser()!;
  const out = new k8s.KubeConfig();
  out.loadFromOptions({
    clusters: [{ ...cluster, server: change.server ?? cluster.server }],
    users: [{ name: user.name, token: change.token ?? user.token }],
    contexts: [{ name: 'switchyard', cluster: cluster.name, user: user.name }],
    currentContext: 'switchyard',
  });
  const file = path.join(dir(), `${change.name}.kubeconfig`);
  writeFileSync(file, out.exportConfig(), { mode: 0o600 });
  return file;
}

/** The names of the test cluster's nodes. */
export async function nodeNames(): Promise<string[]> {
  const { body } = await admin().makeApiClient(k8s.CoreV1Api).listNode();
  return body.items.map((n) => n.metadata?.name ?? '').filter(Boolean);
}

/** The test cluster's API server as `host:port`. */
export function apiServerAddress(): { host: string; port: number } {
  const url = new URL(admin().getCurrentCluster()!.server);
  return { host: url.hostname, port: Number(url.port || 443) };
}

/** A ServiceAccount of the test namespace whose rights are a Role's rules, changeable while a test runs. */
export class TestAccount {
  private constructor(
    readonly name: string,
    /** A kubeconfig for this account alone. */
    readonly kubeconfig: string,
    /** The user the API server takes it for. */
    readonly user: string,
  ) {}

  static async create(prefix: string, rules: RoleRule[]): Promise<TestAccount> {
    const kc = admin();
    const core = kc.makeApiClient(k8s.CoreV1Api);
    const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
    const name = `${prefix}-${randomBytes(3).toString('hex')}`;
    const meta = { name, labels: { 'switchyard.dev/test-account': 'true' } };
    await core.createNamespacedServiceAccount(TEST_NAMESPACE, { metadata: meta });
    await rbac.createNamespacedRole(TEST_NAMESPACE, { metadata: meta, rules });
    await rbac.createNamespacedRoleBinding(TEST_NAMESPACE, {
      metadata: meta,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name },
      subjects: [{ kind: 'ServiceAccount', name, namespace: TEST_NAMESPACE }],
    });
    const { body } = await core.createNamespacedServiceAccountToken(name, TEST_NAMESPACE, {
      spec: { audiences: [], expirationSeconds: 3600 },
    });
    const kubeconfig = kubeconfigWith({ token: body.status!.token, name });
    return new TestAccount(name, kubeconfig, `system:serviceaccount:${TEST_NAMESPACE}:${name}`);
  }

  /**
   * Replaces the account's rules, and waits until the API server's authorizer applies them (RBAC is read from a
   * cache): until it answers a review of `probe` for this account as `allowedAfter`.
   */
  async setRules(rules: RoleRule[], probe: k8s.V1ResourceAttributes, allowedAfter: boolean): Promise<void> {
    const kc = admin();
    await kc
      .makeApiClient(k8s.RbacAuthorizationV1Api)
      .replaceNamespacedRole(this.name, TEST_NAMESPACE, { metadata: { name: this.name }, rules });
    const authz = kc.makeApiClient(k8s.AuthorizationV1Api);
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { body } = await authz.createSubjectAccessReview({
        spec: {
          user: this.user,
          groups: [
            'system:serviceaccounts',
            `system:serviceaccounts:${TEST_NAMESPACE}`,
            'system:authenticated',
          ],
          resourceAttributes: { namespace: TEST_NAMESPACE, ...probe },
        },
      });
      if (body.status?.allowed === allowedAfter) return;
      if (Date.now() > deadline) throw new Error(`the new rules of ${this.name} did not apply within 10 s`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** Deletes the account, its Role and binding, and its kubeconfig. */
  async remove(): Promise<void> {
    const kc = admin();
    const rbac = kc.makeApiClient(k8s.RbacAuthorizationV1Api);
    await Promise.allSettled([
      rbac.deleteNamespacedRoleBinding(this.name, TEST_NAMESPACE),
      rbac.deleteNamespacedRole(this.name, TEST_NAMESPACE),
      kc.makeApiClient(k8s.CoreV1Api).deleteNamespacedServiceAccount(this.name, TEST_NAMESPACE),
    ]);
    rmSync(this.kubeconfig, { force: true });
  }
}
