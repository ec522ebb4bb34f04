import { mkdtempSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';
import { EngineHarness } from '../support/engine-harness';
import { eventually } from '../support/host-probes';
import { EngineProcess, freePort } from '../support/engine-process';
import {
  apiServerAddress,
  ENGINE_ROLE_RULES,
  kubeconfigWith,
  nodeNames,
  TestAccount,
} from '../support/kube-accounts';
import { SANDBOX_BACKENDS, TEST_NAMESPACE } from '../support/sandbox-backends';

jest.setTimeout(120_000);

const EX_CONFIG = 'exit 78';

/**
 * The Kubernetes backend against a cluster that is not what the engine was configured for (the real test cluster,
 * `scripts/k8s.sh`, with accounts and kubeconfigs made for the test). A configuration that cannot work stops the
 * engine at start-up, exit 78 naming the variable; the cluster failing while the engine runs (or before it answers
 * at all) is never a 500: `/health` says not ready and why, a request that needs a pod is answered 503 with a code
 * and a message naming the setting, an action that cannot get one is recorded `denied`; and the engine recovers by
 * itself when the cluster does.
 */
describe.each(SANDBOX_BACKENDS.filter((b) => b.name === 'kubernetes').map((b) => [b.name, b] as const))(
  'the %s backend when the cluster is not right',
  (_name, backend) => {
    /** The backend's environment, with the sandbox image under test when one is named (a cluster of another build). */
    const kubeEnv = async (extra: Record<string, string> = {}): Promise<Record<string, string>> => ({
      ...(await backend.env()),
      ...(process.env.SWITCHYARD_SANDBOX_IMAGE && {
        SWITCHYARD_SANDBOX_IMAGE: process.env.SWITCHYARD_SANDBOX_IMAGE,
      }),
      SWITCHYARD_POOL_MIN: '0',
      ...extra,
    });

    /** `/health`'s backend and `/health/ready`'s kubernetes indicator, as one engine reports them. */
    const readiness = async (engine: EngineHarness) => {
      const health = (await engine.request('GET', '/health')).body;
      const ready = await engine.request('GET', '/health/ready');
      return { backend: health.backend, tiers: health.tiers, ready };
    };

    describe('start-up: a configuration that cannot work stops the engine, exit 78 naming the variable', () => {
      const dirs: string[] = [];
      const accounts: TestAccount[] = [];
      afterAll(async () => {
        dirs.forEach(removeDataDir);
        await Promise.all(accounts.map((a) => a.remove()));
      });

      /** The built engine (`npm run build`) as a process; resolves once it exited, with its stderr. */
      const start = async (env: Record<string, string>): Promise<{ exited: string; log: string }> => {
        const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-k8s-boot-'));
        dirs.push(dir);
        const engine = EngineProcess.spawn(dir, await freePort(), env);
        const exited = await Promise.race([
          engine.exited,
          new Promise<string>((resolve) => setTimeout(() => resolve('still running'), 60_000).unref()),
        ]);
        if (exited === 'still running') await engine.stop('SIGKILL');
        await engine.closed;
        return { exited, log: engine.log };
      };

      it('a namespace that does not exist', async () => {
        const { exited, log } = await start(
          await kubeEnv({ SWITCHYARD_K8S_NAMESPACE: 'switchyard-no-such-namespace' }),
        );
        expect({ exited, log }).toMatchObject({ exited: EX_CONFIG });
        expect(log).toMatch(
          /^ {2}SWITCHYARD_K8S_NAMESPACE: namespace switchyard-no-such-namespace does not exist in the cluster at https:\/\/127\.0\.0\.1:\d+: create it \(with its default ServiceAccount\) or set SWITCHYARD_K8S_NAMESPACE to one that does$/m,
        );
      });

      it('an account without the rights the backend uses (it may only look at pods)', async () => {
        const account = await TestAccount.create('sy-test-readonly', [
          { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list'] },
        ]);
        accounts.push(account);
        const { exited, log } = await start(await kubeEnv({ KUBECONFIG: account.kubeconfig }));
        expect({ exited, log }).toMatchObject({ exited: EX_CONFIG });
        const line = /^ {2}KUBECONFIG: (.*)$/m.exec(log)?.[1];
        expect(line).toBe(
          `the engine's Kubernetes account (${account.user}, from KUBECONFIG ${account.kubeconfig}, context ` +
            'switchyard) may not create, patch, delete pods (session and one-off pods, claiming a warm pod, ending ' +
            "sessions and runs); get, create pods/attach (the runner's protocol); get, create pods/exec (file " +
            `transfer, workspace copies) in namespace ${TEST_NAMESPACE}: grant them (docs/kubernetes.md, "When the ` +
            'cluster is not right", has a Role), set KUBECONFIG (or SWITCHYARD_K8S_CONTEXT) to an account that has ' +
            'them, or SWITCHYARD_K8S_NAMESPACE to a namespace where it does (it may not read namespace ' +
            `${TEST_NAMESPACE} either: does it exist?)`,
        );
      });

      it('credentials the API server does not accept, and a kubeconfig that is not there', async () => {
        const stranger = kubeconfigWith({ token: 'not-a-token-of-this-cluster', name: 'stranger' });
        const missing = path.join(os.tmpdir(), 'switchyard-no-such-kubeconfig');
        const [refused, absent] = await Promise.all([
          start(await kubeEnv({ KUBECONFIG: stranger })),
          start(await kubeEnv({ KUBECONFIG: missing })),
        ]);
        expect(refused).toMatchObject({ exited: EX_CONFIG });
        expect(refused.log).toMatch(
          /^ {2}KUBECONFIG: version: Unauthorized; the API server https:\/\/127\.0\.0\.1:\d+ does not accept the engine's credentials \(from KUBECONFIG .*stranger\.kubeconfig, context switchyard\): renew them, or set KUBECONFIG \(or SWITCHYARD_K8S_CONTEXT\) to credentials it accepts$/m,
        );
        expect(absent).toMatchObject({ exited: EX_CONFIG });
        expect(absent.log).toMatch(
          /^ {2}KUBECONFIG: cannot load the Kubernetes configuration .*switchyard-no-such-kubeconfig: ENOENT/m,
        );
      });
    });

    describe('an API server nobody listens on at start-up', () => {
      let engine: EngineHarness;
      let port: number;
      let relay: net.Server | undefined;
      beforeAll(async () => {
        port = await freePort();
        const kubeconfig = kubeconfigWith({ server: `https://127.0.0.1:${port}`, name: `down-${port}` });
        engine = await EngineHarness.start(await kubeEnv({ KUBECONFIG: kubeconfig }));
      });
      afterAll(async () => {
        await engine?.stop();
        relay?.close();
      });

      it('the engine starts anyway; /health is not ready, naming the server and KUBECONFIG', async () => {
        const { backend: b, tiers, ready } = await readiness(engine);
        expect(b).toMatchObject({ name: 'kubernetes', ready: false, code: 'KUBERNETES_UNAVAILABLE' });
        expect(b.reason).toMatch(
          new RegExp(
            `^version: connect ECONNREFUSED 127\\.0\\.0\\.1:${port}; the Kubernetes API server https://127\\.0\\.0\\.1:${port} ` +
              `\\(from KUBECONFIG .*down-${port}\\.kubeconfig, context switchyard\\) does not answer: start it, or set ` +
              'KUBECONFIG \\(or SWITCHYARD_K8S_CONTEXT\\) to a cluster that answers$',
          ),
        );
        expect(tiers.pooled).toMatchObject({ available: false, code: 'KUBERNETES_UNAVAILABLE' });
        expect(ready.status).toBe(503);
        expect(ready.body.error.details.indicators.kubernetes).toMatchObject({
          status: 'down',
          code: 'KUBERNETES_UNAVAILABLE',
        });
      });

      it('a new session is 503 KUBE_UNAVAILABLE naming KUBECONFIG, and leaves nothing', async () => {
        const r = await engine.request('POST', '/v1/sessions', {});
        expect(r.status).toBe(503);
        expect(r.body.error.code).toBe('KUBE_UNAVAILABLE');
        expect(r.body.error.message).toContain(`does not answer: start it, or set KUBECONFIG`);
        expect((await engine.request('GET', '/v1/sessions')).body.sessions).toEqual([]);
      });

      it('once the server answers there, the engine is ready and sessions get pods, without a restart', async () => {
        // The cluster's API server comes to that address: a TCP relay to it (TLS end to end, the same certificate).
        const target = apiServerAddress();
        relay = net.createServer((client) => {
          const upstream = net.connect(target.port, target.host);
          client.pipe(upstream).pipe(client);
          client.on('error', () => upstream.destroy());
          upstream.on('error', () => client.destroy());
        });
        await new Promise<void>((resolve) => relay!.listen(port, '127.0.0.1', resolve));
        const { backend: b, ready } = await readiness(engine);
        expect(b).toMatchObject({ name: 'kubernetes', ready: true });
        expect(b.code).toBeUndefined();
        expect(ready.status).toBe(200);
        const sid = await engine.createSession();
        expect(
          await engine.action(sid, { type: 'code', language: 'python', code: 'print(6 * 7)' }),
        ).toMatchObject({ status: 'succeeded', stdout: '42\n', tier: 'pooled' });
        await engine.request('DELETE', `/v1/sessions/${sid}`);
      });
    });

    describe('an account that loses rights while the engine runs', () => {
      let account: TestAccount;
      let engine: EngineHarness;
      let sid: string;
      beforeAll(async () => {
        account = await TestAccount.create('sy-test-engine', ENGINE_ROLE_RULES);
        engine = await EngineHarness.start(
          await kubeEnv({
            KUBECONFIG: account.kubeconfig,
            // Pods of a spec no other engine warms: a new session must create its pod, not claim another's warm one.
            SWITCHYARD_K8S_CPU_REQUEST: '0.093',
          }),
        );
        sid = await engine.createSession();
        // It may no longer create pods or exec in them; the session's pod and its runner (attach) stay.
        await account.setRules(
          [
            { apiGroups: [''], resources: ['pods'], verbs: ['get', 'list', 'patch', 'delete'] },
            { apiGroups: [''], resources: ['pods/attach'], verbs: ['get', 'create'] },
            { apiGroups: [''], resources: ['namespaces'], verbs: ['get'] },
          ],
          { verb: 'get', resource: 'pods', subresource: 'exec' },
          false,
        );
      });
      afterAll(async () => {
        await engine?.stop();
        await account?.remove();
      });

      it('a file upload (an exec in the pod) is 503 KUBE_FORBIDDEN, naming the account and KUBECONFIG', async () => {
        const r = await fetch(`${engine.baseUrl}/v1/sessions/${sid}/files/content?path=up.txt`, {
          method: 'PUT',
          headers: { 'content-type': 'application/octet-stream' },
          body: 'hello',
        });
        const body = (await r.json()) as { error: { code: string; message: string } };
        expect({ status: r.status, code: body.error.code }).toEqual({ status: 503, code: 'KUBE_FORBIDDEN' });
        expect(body.error.message).toContain(
          `the cluster refuses the engine's account (from KUBECONFIG ${account.kubeconfig}, context switchyard) ` +
            'this right: grant it (docs/kubernetes.md lists the rights the engine uses), or set KUBECONFIG (or ' +
            'SWITCHYARD_K8S_CONTEXT) to an account that has it',
        );
      });

      it('a one-off action (a pod of its own) is denied TIER_UNAVAILABLE, naming KUBECONFIG', async () => {
        const r = await engine.action(sid, {
          type: 'code',
          language: 'python',
          code: 'print(1)',
          tier: 'container',
        });
        expect(r).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'TIER_UNAVAILABLE' } });
        expect(r.error.message).toMatch(
          new RegExp(
            `^tier "container" is not available: the cluster refuses to create the engine's pods in namespace ` +
              `${TEST_NAMESPACE}: create pod sy-c-.* is forbidden: User "${account.user}" cannot create resource "pods".*` +
              'set KUBECONFIG \\(or SWITCHYARD_K8S_CONTEXT\\) to an account that has it$',
          ),
        );
      });

      it('a new session is 503 KUBERNETES_FORBIDDEN; /health is not ready saying why', async () => {
        const r = await engine.request('POST', '/v1/sessions', {});
        expect(r.status).toBe(503);
        expect(r.body.error.code).toBe('KUBERNETES_FORBIDDEN');
        expect(r.body.error.message).toContain('KUBECONFIG');
        const { backend: b, ready } = await readiness(engine);
        expect(b).toMatchObject({ ready: false, code: 'KUBERNETES_FORBIDDEN' });
        expect(b.reason).toMatch(
          /^sandbox pods do not start \(.*\): the cluster refuses to create the engine's pods/,
        );
        expect(ready.status).toBe(503);
        expect(ready.body.error.details.indicators.kubernetes).toMatchObject({
          status: 'down',
          code: 'KUBERNETES_FORBIDDEN',
        });
      });

      it('the session it has keeps working in its pod (the runner needs no new rights)', async () => {
        expect(
          await engine.action(sid, { type: 'code', language: 'python', code: 'print("still here")' }),
        ).toMatchObject({ status: 'succeeded', stdout: 'still here\n', tier: 'pooled' });
      });

      it('once its pod is gone, the next action that needs a new one is denied TIER_UNAVAILABLE naming KUBECONFIG', async () => {
        const [pod] = await backend.sandboxesWith({ session: sid });
        expect(pod).toBeDefined();
        await backend.remove([pod.id]);
        // Gone, not only on its way out (a pod keeps running through its grace period).
        expect(await eventually(async () => !(await backend.exists(pod.id)), 30_000, 200)).toBe(true);
        // The pod was lost with its workspace (an error naming that), or the engine already knows: either way, the
        // action that must create a pod for the session cannot, and that is a recorded refusal, never an internal error.
        let r = await engine.action(sid, { type: 'code', language: 'python', code: 'print(2)' });
        if (r.status === 'error') {
          expect(r.error).toMatchObject({ code: 'SESSION_POD_LOST' });
          r = await engine.action(sid, { type: 'code', language: 'python', code: 'print(2)' });
        }
        expect(r).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'TIER_UNAVAILABLE' } });
        expect(r.error.message).toContain('KUBECONFIG');
        expect(r.error.message).not.toMatch(/internal error/);
      });
    });

    // Placed by the cluster's scheduler (no node name), or bound to a node by name (a cluster without a scheduler).
    describe.each([
      ['placed by the scheduler', false],
      ['bound by SWITCHYARD_K8S_NODE_NAME', true],
    ] as const)('pods %s', (_how, byName) => {
      const placement = async (): Promise<Record<string, string>> =>
        byName ? { SWITCHYARD_K8S_NODE_NAME: (await nodeNames())[0] } : {};

      describe('that no node has room for', () => {
        let engine: EngineHarness;
        beforeAll(async () => {
          engine = await EngineHarness.start(
            await kubeEnv({
              ...(await placement()),
              // More memory than any test machine has: the scheduler, or the kubelet of the node named, refuses it.
              SWITCHYARD_POOLED_MEMORY_BYTES: String(2 ** 42),
              // The scheduler answers at once; a busy kubelet may take seconds to turn a pod away.
              SWITCHYARD_K8S_POD_START_TIMEOUT_MS: byName ? '6000' : '2000',
            }),
          );
        });
        afterAll(() => engine?.stop());

        it('a new session is 503 POD_START_TIMEOUT naming the memory setting; /health is not ready saying why', async () => {
          const t0 = Date.now();
          const r = await engine.request('POST', '/v1/sessions', {});
          expect(r.status).toBe(503);
          expect(r.body.error.code).toBe('POD_START_TIMEOUT');
          expect(r.body.error.message).toMatch(
            byName
              ? /ended before it ran: OutOfmemory \(.*\); node .* \(SWITCHYARD_K8S_NODE_NAME\) had no room for it within 6000 ms/
              : /was not running within 2000 ms: no node can take it \(0\/\d+ nodes are available: .*Insufficient memory/,
          );
          expect(r.body.error.message).toContain('SWITCHYARD_POOLED_MEMORY_BYTES of memory');
          expect(r.body.error.message).toContain('SWITCHYARD_K8S_POD_START_TIMEOUT_MS');
          expect(Date.now() - t0).toBeLessThan(20_000);
          expect((await engine.request('GET', '/v1/sessions')).body.sessions).toEqual([]);
          const { backend: b, ready } = await readiness(engine);
          expect(b).toMatchObject({ ready: false, code: 'POD_START_TIMEOUT' });
          expect(b.reason).toMatch(/^sandbox pods do not start \(.*\): .*SWITCHYARD_POOLED_MEMORY_BYTES/);
          expect(ready.status).toBe(503);
          expect(ready.body.error.details.indicators.kubernetes).toMatchObject({ code: 'POD_START_TIMEOUT' });
        });
      });

      describe('with a node selector no node matches', () => {
        let engine: EngineHarness;
        beforeAll(async () => {
          engine = await EngineHarness.start(
            await kubeEnv({
              ...(await placement()),
              SWITCHYARD_K8S_NODE_SELECTOR: 'switchyard.dev/no-such-label=x',
              // As above: a busy kubelet may take seconds to turn the pod away (CI saw more than 2 s).
              SWITCHYARD_K8S_POD_START_TIMEOUT_MS: byName ? '8000' : '2000',
            }),
          );
        });
        afterAll(() => engine?.stop());

        it('/health is not ready naming the selector; a new session is 503 naming SWITCHYARD_K8S_NODE_SELECTOR', async () => {
          const { backend: b, ready } = await readiness(engine);
          expect(b).toMatchObject({ ready: false, code: 'KUBERNETES_NO_READY_NODE' });
          expect(b.reason).toMatch(
            /^no Ready node .*matching SWITCHYARD_K8S_NODE_SELECTOR to run sandbox pods on/,
          );
          expect(ready.status).toBe(503);
          const r = await engine.request('POST', '/v1/sessions', {});
          expect(r.status).toBe(503);
          if (byName) {
            // The node named refuses a pod whose selector it does not match, at once.
            expect(r.body.error.code).toBe('POD_REJECTED');
            expect(r.body.error.message).toMatch(
              /ended before it ran: NodeAffinity .*: SWITCHYARD_K8S_NODE_SELECTOR asks for labels node .* does not have \(SWITCHYARD_K8S_NODE_NAME binds every pod to it\): change either$/,
            );
          } else {
            expect(r.body.error.code).toBe('POD_START_TIMEOUT');
            expect(r.body.error.message).toMatch(
              /no node can take it \(.*affinity\/selector.*\): check SWITCHYARD_K8S_NODE_SELECTOR \(does a Ready node have those labels\?\)/,
            );
          }
        });
      });
    });

    describe('an image the node does not have', () => {
      const image = 'switchyard/sandbox:no-such-tag';
      let never: EngineHarness;
      let pulling: EngineHarness;
      beforeAll(async () => {
        [never, pulling] = await Promise.all([
          EngineHarness.start(await kubeEnv({ SWITCHYARD_SANDBOX_IMAGE: image })),
          EngineHarness.start(
            await kubeEnv({
              SWITCHYARD_SANDBOX_IMAGE: image,
              SWITCHYARD_K8S_IMAGE_PULL_POLICY: 'IfNotPresent',
              SWITCHYARD_K8S_POD_START_TIMEOUT_MS: '60000',
            }),
          ),
        ]);
      });
      afterAll(async () => {
        await never?.stop();
        await pulling?.stop();
      });

      it('pull policy Never: /health names the image; a new session is 503 SANDBOX_IMAGE_MISSING at once', async () => {
        const { backend: b, ready } = await readiness(never);
        expect(b).toMatchObject({ ready: false, code: 'SANDBOX_IMAGE_MISSING' });
        expect(b.reason).toContain(`image ${image} is on no Ready node`);
        expect(ready.status).toBe(503);
        expect(ready.body.error.details.indicators.sandbox_image).toMatchObject({ status: 'down' });
        const r = await never.request('POST', '/v1/sessions', {});
        expect(r.status).toBe(503);
        expect(r.body.error.code).toBe('SANDBOX_IMAGE_MISSING');
        expect(r.body.error.message).toMatch(
          new RegExp(
            `cannot have image ${image} \\(ErrImageNeverPull.*\\); SWITCHYARD_K8S_IMAGE_PULL_POLICY is Never`,
          ),
        );
        expect(r.body.error.message).toContain('or set SWITCHYARD_SANDBOX_IMAGE to an image the nodes have');
      });

      it('a pull that fails is 503 SANDBOX_IMAGE_MISSING well before the start timeout; /health says why', async () => {
        const t0 = Date.now();
        const r = await pulling.request('POST', '/v1/sessions', {});
        expect(r.status).toBe(503);
        expect(r.body.error.code).toBe('SANDBOX_IMAGE_MISSING');
        expect(r.body.error.message).toMatch(/\((ErrImagePull|ImagePullBackOff)/);
        expect(r.body.error.message).toContain(
          'SWITCHYARD_K8S_IMAGE_PULL_POLICY is IfNotPresent: the node must reach a registry that has it',
        );
        expect(Date.now() - t0).toBeLessThan(45_000);
        const { backend: b, ready } = await readiness(pulling);
        expect(b).toMatchObject({ ready: false, code: 'SANDBOX_IMAGE_MISSING' });
        expect(b.reason).toMatch(/^sandbox pods do not start/);
        expect(ready.body.error.details.indicators.sandbox_image).toMatchObject({ status: 'down' });
      });
    });
  },
);
