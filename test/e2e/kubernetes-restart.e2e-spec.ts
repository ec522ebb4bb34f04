import { mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  ClientNodeKubeClient,
  K8S_ANNOTATIONS,
  resolveKubernetesOptions,
  sessionPodManifest,
} from '@switchyard/sandbox';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';
import { eventually } from '../support/host-probes';
import { SANDBOX_BACKENDS, TEST_KUBECONFIG, TEST_NAMESPACE } from '../support/sandbox-backends';

jest.setTimeout(120_000);

/**
 * Issue 33 item 5: a session's files, kernels and background processes live in its pod, and the pod outlives the
 * engine. An engine killed (SIGKILL) and started again on the same data adopts each session's pod instead of deleting
 * it: the file written before is there, the kernel answers with the variable it held (same kernel id), the background
 * processes are listed and still running (their output file kept growing while no engine was there), the action that
 * ran when the engine died reads `interrupted`, and new code runs at once. A pod left for a session the engine's state
 * does not know is reaped. A session whose pod went away meanwhile cannot be adopted: it starts over in a fresh, empty
 * pod, and the engine starts all the same (it used to exit 0 while it waited for that pod at start-up).
 */
describe.each(SANDBOX_BACKENDS.filter((b) => b.name === 'kubernetes').map((b) => [b.name, b] as const))(
  'sessions on the %s backend across an engine restart',
  (_name, backend) => {
    let dataDir: string;
    let engine: EngineProcess | undefined;
    const client = new ClientNodeKubeClient({
      kubeconfigPath: TEST_KUBECONFIG,
      namespace: TEST_NAMESPACE,
      apiTimeoutMs: 10_000,
      execTimeoutMs: 30_000,
    });
    const orphan = `sy-restart-orphan-${process.pid}`;

    beforeAll(() => {
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-k8s-restart-'));
    });
    afterAll(async () => {
      await engine?.stop('SIGTERM');
      await client.deletePod(orphan, 1).catch(() => undefined);
      client.close();
      removeDataDir(dataDir);
    });

    const env = async (): Promise<Record<string, string>> => ({
      ...(await backend.env()),
      ...(process.env.SWITCHYARD_SANDBOX_IMAGE && {
        SWITCHYARD_SANDBOX_IMAGE: process.env.SWITCHYARD_SANDBOX_IMAGE,
      }),
      SWITCHYARD_POOL_MIN: '0',
    });
    const act = async (e: EngineProcess, sid: string, body: Record<string, unknown>) => {
      const res = await e.request('POST', `/v1/sessions/${sid}/actions`, body);
      expect({ status: res.status, body: res.body }).toMatchObject({ status: 200 });
      return res.body;
    };
    const code = (
      e: EngineProcess,
      sid: string,
      language: string,
      source: string,
      extra: Record<string, unknown> = {},
    ) => act(e, sid, { type: 'code', language, code: source, timeoutMs: 30_000, ...extra });
    /** Lines of the ticker's file, read by a fresh run in the pod. */
    const ticks = async (e: EngineProcess, sid: string): Promise<number> => {
      const out = await code(e, sid, 'bash', 'wc -l < ticks.txt');
      return Number(String(out.stdout).trim());
    };

    it("adopts the session's pod: file, kernel variable and processes kept, the running action interrupted", async () => {
      const port = await freePort();
      const first = await EngineProcess.start(dataDir, port, await env());
      engine = first;
      const sid = await first.createSession();
      await act(first, sid, { type: 'file', op: 'write', path: 'before.txt', content: 'kept' });
      const cell = await code(first, sid, 'python', 'x = 41\nprint("set")', { state: 'session' });
      expect(cell).toMatchObject({ status: 'succeeded' });
      const kernelId = cell.output.kernel.id as string;
      const web = await act(first, sid, {
        type: 'process',
        op: 'start',
        name: 'web',
        command: 'python3 -u -m http.server 8765 --bind 127.0.0.1',
      });
      const ticker = await act(first, sid, {
        type: 'process',
        op: 'start',
        name: 'ticker',
        command: 'while true; do date +%s%N >> ticks.txt; sleep 0.2; done',
      });
      expect([web.status, ticker.status]).toEqual(['succeeded', 'succeeded']);
      expect(web.output.processId).toMatch(/^prc_/);
      const [pod] = await backend.describeSandboxes({ session: sid });
      expect(pod).toBeDefined();
      // A pod the dead engine left for a session its state never had: reaped at the next start.
      const info = await client.readPod(pod.id);
      const image = info!.annotations[K8S_ANNOTATIONS.image];
      const options = resolveKubernetesOptions({ image, engineId: pod.engine, namespace: TEST_NAMESPACE });
      await client.createPod(
        sessionPodManifest({
          name: orphan,
          image,
          engineId: pod.engine,
          limits: options.limits.pooled,
          options,
          state: 'claimed',
          sessionId: 'ses_000000000000000000000gone',
          specHash: 'restart-e2e',
        }),
      );
      // A second session whose pod goes away while no engine runs (evicted, deleted): nothing to adopt.
      const lost = await first.createSession();
      await act(first, lost, { type: 'file', op: 'write', path: 'gone.txt', content: 'gone' });
      const [lostPod] = await backend.describeSandboxes({ session: lost });
      // Read before the long action: the session's fresh runs go one at a time.
      const before = await ticks(first, sid);
      // The long action runs when the engine dies.
      const long = first
        .request('POST', `/v1/sessions/${sid}/actions`, {
          type: 'code',
          language: 'bash',
          code: 'echo started; sleep 40',
          timeoutMs: 60_000,
        })
        .catch(() => undefined);
      const running = await eventually(async () => {
        const { body } = await first.request('GET', `/v1/sessions/${sid}/actions`);
        return body.actions.some((a: { status: string }) => a.status === 'running');
      }, 20_000);
      expect(running).toBe(true);
      await first.stop('SIGKILL');
      await long;
      await client.deletePod(lostPod.id, 1);
      await new Promise((r) => setTimeout(r, 1000)); // the ticker goes on with no engine

      const t0 = Date.now();
      const second = await EngineProcess.start(dataDir, port, await env());
      engine = second;
      // The same pod, now the new engine's.
      const [now] = await backend.describeSandboxes({ session: sid });
      expect(now).toMatchObject({ id: pod.id, session: sid });
      expect(now.engine).not.toBe(pod.engine);

      const timeline = await second.request('GET', `/v1/sessions/${sid}/actions`);
      const statuses = timeline.body.actions.map((a: { status: string }) => a.status);
      expect(statuses.at(-1)).toBe('interrupted');
      expect(statuses).not.toContain('running');

      const read = await act(second, sid, { type: 'file', op: 'read', path: 'before.txt' });
      expect(read.output.content).toBe('kept');

      const kernels = await second.request('GET', `/v1/sessions/${sid}/kernels`);
      expect(kernels.body.kernels).toEqual([expect.objectContaining({ id: kernelId, language: 'python' })]);
      const again = await code(second, sid, 'python', 'x + 1', { state: 'session' });
      expect(again).toMatchObject({ status: 'succeeded' });
      expect(again.output.kernel).toMatchObject({ id: kernelId, started: false, executionCount: 2 });
      expect(again.output.result).toBe('42');

      const listed = await act(second, sid, { type: 'process', op: 'list' });
      expect(listed.output.processes).toEqual(
        expect.arrayContaining([
          expect.objectContaining({ id: web.output.processId, name: 'web', running: true }),
          expect.objectContaining({ id: ticker.output.processId, name: 'ticker', running: true }),
        ]),
      );
      // Both still run: the server answers, the ticker's file grew while no engine was there and still grows.
      const curl = await code(
        second,
        sid,
        'bash',
        "curl -sS -o /dev/null -w '%{http_code}' --max-time 10 http://127.0.0.1:8765/",
      );
      expect(curl.stdout).toBe('200');
      const after = await ticks(second, sid);
      expect(after).toBeGreaterThan(before + 3);
      await new Promise((r) => setTimeout(r, 600));
      expect(await ticks(second, sid)).toBeGreaterThan(after);

      // New code runs at once, and the orphan's pod is gone.
      expect(await code(second, sid, 'python', 'print(6 * 7)')).toMatchObject({
        status: 'succeeded',
        stdout: '42\n',
      });
      expect(await eventually(async () => (await client.readPod(orphan)) === undefined, 20_000)).toBe(true);
      // The session whose pod was gone starts over in a fresh pod (the engine started all the same), empty.
      const [fresh] = await backend.describeSandboxes({ session: lost });
      expect(fresh.id).not.toBe(lostPod.id);
      const ls = await code(second, lost, 'bash', 'ls');
      expect(ls).toMatchObject({ status: 'succeeded', stdout: '' });
      // Bounded: the restart and every check above.
      expect(Date.now() - t0).toBeLessThan(60_000);

      // The adopted processes stop as any do.
      const stopped = await act(second, sid, {
        type: 'process',
        op: 'stop',
        processId: 'ticker',
        graceMs: 500,
      });
      expect(stopped.output.process).toMatchObject({ id: ticker.output.processId, running: false });
    });
  },
);
