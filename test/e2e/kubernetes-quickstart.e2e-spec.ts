import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import * as k8s from '@kubernetes/client-node';
import { K8S_LABELS, labelValue, normalizeImageRef } from '@switchyard/sandbox';
import { EngineProcess, freePort } from '../support/engine-process';
import { shellExamples } from '../support/markdown-examples';

jest.setTimeout(60_000);

const run = promisify(execFile);
const REPO = path.resolve(__dirname, '../..');

/** The README's Kubernetes quick start: its shell block that starts the test cluster, line by line. */
function quickStart(): string[] {
  const block = shellExamples(REPO, 'README.md').find((e) => e.script.includes('scripts/k8s.sh start'));
  if (!block) throw new Error('README.md has no shell block running `scripts/k8s.sh start`');
  return block.script
    .split('\n')
    .map((l) => l.replace(/\s+#.*$/, '').trim())
    .filter((l) => l && !l.startsWith('#'));
}

/** What a shell run with nothing of ours in its environment has, after `script`, as name → value. */
async function cleanShellEnv(script: string): Promise<Record<string, string>> {
  const { stdout } = await run('env', ['-i', 'bash', '-c', `${script}\nenv -0`], { cwd: REPO });
  return Object.fromEntries(
    stdout
      .split('\0')
      .filter(Boolean)
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

/**
 * The README's "Sandboxes on Kubernetes" quick start, followed as a person would: its `bash scripts/k8s.sh start`
 * line run as written, its `set -a; . .runtime/k8s/engine.env; set +a` line run in a shell with an empty
 * environment, and the engine (`npm start` runs the built engine after its setup steps) started with only what that
 * line set. Nothing else is configured: no node name (the cluster's scheduler places the pods), the namespace the
 * file names (which the cluster made), the image it names (which the node already lists: `start` returns only then).
 * A session's pooled `print(1)` succeeds in its pod; with the RuntimeClass the file names, a one-off action runs on
 * gVisor's kernel.
 */
describe("the README's Kubernetes quick start", () => {
  let engine: EngineProcess;
  let settings: Record<string, string>;
  let kubeconfig: string;
  let core: k8s.CoreV1Api;
  let sid: string;
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'sy-k8s-quickstart-'));

  beforeAll(async () => {
    const lines = quickStart();
    expect(lines).toEqual([
      'bash scripts/k8s.sh start',
      'set -a; . .runtime/k8s/engine.env; set +a',
      'npm start',
    ]);
    // Quick when the cluster runs (CI starts it before the tests); a first start builds for minutes.
    const started = await run('bash', ['-c', lines[0]], { cwd: REPO, timeout: 170_000 }).catch(
      (err: Error & { stderr?: string }) => {
        throw new Error(
          `${lines[0]} failed (a first build takes ~20 min: run it once by hand): ${err.stderr}`,
        );
      },
    );
    kubeconfig = started.stdout.trim().split('\n').pop()!;
    expect(started.stderr).toContain(
      `set -a; . ${path.join(path.dirname(kubeconfig), 'engine.env')}; set +a`,
    );

    const before = await cleanShellEnv('true');
    const after = await cleanShellEnv(lines[1]);
    settings = Object.fromEntries(Object.entries(after).filter(([k, v]) => before[k] !== v));

    const kc = new k8s.KubeConfig();
    kc.loadFromFile(kubeconfig);
    core = kc.makeApiClient(k8s.CoreV1Api);

    // The engine sees only the file's settings: none of the test run's own.
    for (const name of Object.keys(process.env)) {
      if (/^(SWITCHYARD_|KUBECONFIG$|DOCKER_HOST$)/.test(name)) delete process.env[name];
    }
    engine = await EngineProcess.start(dataDir, await freePort(), settings);
  }, 240_000);

  afterAll(async () => {
    if (sid) await engine?.request('DELETE', `/v1/sessions/${sid}`);
    await engine?.stop('SIGTERM');
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('engine.env holds what an engine needs for the cluster, and no node name', () => {
    expect(settings).toMatchObject({
      SWITCHYARD_SANDBOX_BACKEND: 'kubernetes',
      KUBECONFIG: kubeconfig,
      SWITCHYARD_K8S_NAMESPACE: 'switchyard',
      SWITCHYARD_SANDBOX_IMAGE: expect.stringMatching(/^switchyard\/sandbox:/) as string,
    });
    expect(settings).not.toHaveProperty('SWITCHYARD_K8S_NODE_NAME');
  });

  it('the node lists the image engine.env names (start returned only then), and /health is ready', async () => {
    const { body } = await core.listNode();
    const listed = body.items.flatMap((n) => (n.status?.images ?? []).flatMap((i) => i.names ?? []));
    expect(listed).toContain(normalizeImageRef(settings.SWITCHYARD_SANDBOX_IMAGE));

    const health = await engine.request('GET', '/health');
    expect(health.body.backend).toMatchObject({ name: 'kubernetes', namespace: 'switchyard', ready: true });
  });

  it("a session's pooled print(1) succeeds, in a pod the cluster's scheduler placed", async () => {
    sid = await engine.createSession({ metadata: { agent: 'quickstart' } });
    const r = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'python',
      code: 'print(1)',
      tier: 'pooled',
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'succeeded', exitCode: 0, stdout: '1\n', tier: 'pooled' });

    const { body: pods } = await core.listNamespacedPod(
      'switchyard',
      undefined,
      undefined,
      undefined,
      undefined,
      `${K8S_LABELS.session}=${labelValue(sid)}`,
    );
    expect(pods.items).toHaveLength(1);
    const pod = pods.items[0];
    expect(pod.spec?.nodeName).toBeTruthy();
    // The scheduler's binding leaves an event; a pod the engine had bound itself (nodeName) has none.
    const { body: events } = await core.listNamespacedEvent(
      'switchyard',
      undefined,
      undefined,
      undefined,
      `involvedObject.name=${pod.metadata!.name}`,
    );
    expect(
      events.items.filter(
        (e) =>
          e.reason === 'Scheduled' &&
          (e.reportingComponent === 'default-scheduler' || e.source?.component === 'default-scheduler'),
      ),
    ).toHaveLength(1);
  });

  it("a one-off action runs in the RuntimeClass engine.env names: gVisor's kernel, not the host's", async () => {
    expect(settings.SWITCHYARD_K8S_RUNTIME_CLASS).toBe('gvisor');
    const r = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'uname -r; cat /proc/cmdline',
      tier: 'container',
    });
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ status: 'succeeded', tier: 'container' });
    const [release, cmdline] = (r.body.stdout as string).trim().split('\n');
    expect(release).not.toBe(os.release());
    expect(cmdline).toMatch(/vmlinuz-[\d.]+-gvisor/);
    const view = await engine.request('GET', `/v1/sessions/${sid}/actions/${r.body.id}`);
    expect(view.body.sandbox).toMatchObject({ tier: 'container', runtime: 'gvisor' });
  });
});
