import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import WebSocket from 'ws';
import { EngineHarness } from '../support/engine-harness';
import { TerminalClient } from '../support/terminal-client';
import { SANDBOX_BACKENDS } from '../support/sandbox-backends';

jest.setTimeout(120_000);

/**
 * The Kubernetes backend against a cluster that is not what the engine was configured for (the real test cluster,
 * `scripts/k8s.sh`): a node that does not exist. A missing dependency, never an engine fault: `/health` says the
 * backend is not ready and why, and a request that needs a pod is answered 503 with a code and a message naming the
 * setting to change (the other failures of the cluster, and the start-up checks: kubernetes-failures.e2e-spec.ts).
 * Also the pod side of checkpoints: a restore or a fork unpacks only what a checkpoint keeps; and the ports proxy to
 * a server in a session pod, through the pod's runner.
 */
describe.each(SANDBOX_BACKENDS.filter((b) => b.name === 'kubernetes').map((b) => [b.name, b] as const))(
  'the %s backend and its cluster',
  (_name, backend) => {
    describe('with a node that does not exist', () => {
      let engine: EngineHarness;
      beforeAll(async () => {
        engine = await EngineHarness.start({
          ...(await backend.env()),
          SWITCHYARD_K8S_NODE_NAME: 'switchyard-no-such-node',
          SWITCHYARD_K8S_POD_START_TIMEOUT_MS: '3000',
          SWITCHYARD_POOL_MIN: '0',
        });
      });
      afterAll(() => engine?.stop());

      it('/health says no Ready node of that name, naming SWITCHYARD_K8S_NODE_NAME', async () => {
        const health = (await engine.request('GET', '/health')).body;
        expect(health.backend).toMatchObject({ name: 'kubernetes', ready: false });
        expect(health.backend.reason).toContain('switchyard-no-such-node (SWITCHYARD_K8S_NODE_NAME)');
        expect(health.tiers.pooled.code).toBe('KUBERNETES_NO_READY_NODE');
      });

      it('a new session is 503 POD_START_TIMEOUT once its pod did not start in time, naming the settings', async () => {
        const t0 = Date.now();
        const r = await engine.request('POST', '/v1/sessions', {});
        expect(r.status).toBe(503);
        expect(r.body.error.code).toBe('POD_START_TIMEOUT');
        expect(r.body.error.message).toContain('was not running within 3000 ms');
        expect(r.body.error.message).toContain('node switchyard-no-such-node (SWITCHYARD_K8S_NODE_NAME)');
        expect(r.body.error.message).toContain('SWITCHYARD_K8S_POD_START_TIMEOUT_MS');
        // The start timeout, not the claim's 30 s or more: the pod's own deadline is what failed.
        expect(Date.now() - t0).toBeLessThan(30_000);
        expect((await engine.request('GET', '/v1/sessions')).body.sessions).toEqual([]);
      });
    });

    describe('checkpoints and ports of a session pod', () => {
      let engine: EngineHarness;
      beforeAll(async () => {
        engine = await EngineHarness.start({ ...(await backend.env()), SWITCHYARD_POOL_MIN: '1' });
      });
      afterAll(() => engine?.stop());

      const ENTRIES =
        'import os, stat, json\nout = {}\nfor root, dirs, files in os.walk("."):\n' +
        '    for n in dirs + files:\n        p = os.path.join(root, n)[2:]\n        m = os.lstat(p).st_mode\n' +
        '        out[p] = "link:" + os.readlink(p) if stat.S_ISLNK(m) else "dir" if stat.S_ISDIR(m) else ' +
        '"file" if stat.S_ISREG(m) else "fifo" if stat.S_ISFIFO(m) else "other"\n' +
        'print(json.dumps(out, sort_keys=True))';

      it('/health/ready is 200 with the cluster as configured: kubernetes and the sandbox image up', async () => {
        const ready = await engine.request('GET', '/health/ready');
        expect(ready.status).toBe(200);
        expect(ready.body.details).toMatchObject({
          kubernetes: { status: 'up', namespace: 'switchyard-test' },
          sandbox_image: { status: 'up' },
        });
        expect(ready.body.details.docker).toBeUndefined();
      });

      it('keeps files, directories and links (in or out); a restore and a fork bring back no fifo', async () => {
        const code = (sid: string, language: string, source: string) =>
          engine.action(sid, { type: 'code', language, code: source, tier: 'pooled', timeoutMs: 30_000 });
        const entries = async (sid: string) => {
          const r = await code(sid, 'python', ENTRIES);
          expect(r).toMatchObject({ status: 'succeeded' });
          return JSON.parse(r.stdout) as Record<string, string>;
        };
        const kept = {
          '.home': 'dir',
          'a.txt': 'file',
          sub: 'dir',
          'sub/b.txt': 'file',
          in: 'link:sub/b.txt',
          out: 'link:/etc/hostname',
        };
        const sid = await engine.createSession();
        const made = await code(
          sid,
          'bash',
          'mkdir sub && printf a > a.txt && printf b > sub/b.txt && ln -s sub/b.txt in && ' +
            'ln -s /etc/hostname out && mkfifo pipe sub/pipe2 && echo made',
        );
        expect(made).toMatchObject({ status: 'succeeded', stdout: 'made\n' });
        expect(await entries(sid)).toEqual({ ...kept, pipe: 'fifo', 'sub/pipe2': 'fifo' });

        const taken = await engine.request('POST', `/v1/sessions/${sid}/checkpoints`, {});
        expect(taken.status).toBe(201);
        expect(taken.body).toMatchObject({ files: 4, directories: 2, bytes: 2 });

        const now = await engine.request('POST', `/v1/sessions/${sid}/fork`, {});
        const past = await engine.request('POST', `/v1/sessions/${sid}/fork`, {
          checkpointId: taken.body.id,
        });
        expect([now.status, past.status]).toEqual([201, 201]);
        expect(await entries(now.body.id)).toEqual(kept);
        expect(await entries(past.body.id)).toEqual(kept);

        expect(await code(sid, 'bash', 'rm -rf ./* && ls -A')).toMatchObject({ stdout: '.home\n' });
        expect(
          (await engine.request('POST', `/v1/sessions/${sid}/checkpoints/${taken.body.id}/restore`)).status,
        ).toBe(200);
        expect(await entries(sid)).toEqual(kept);
        for (const s of [sid, now.body.id, past.body.id]) await engine.request('DELETE', `/v1/sessions/${s}`);
      });

      it('proxies HTTP and a WebSocket to a server in the pod, through its runner (no Service, no port-forward)', async () => {
        const app = readFileSync(path.join(__dirname, '..', 'support', 'ports_app.py'), 'utf8');
        const sid = await engine.createSession();
        expect(
          await engine.action(sid, { type: 'file', op: 'write', path: 'ports_app.py', content: app }),
        ).toMatchObject({
          status: 'succeeded',
        });
        const started = await engine.action(sid, {
          type: 'process',
          op: 'start',
          name: 'web',
          command: 'python3 -u ports_app.py 8000',
        });
        expect(started).toMatchObject({ status: 'succeeded', tier: 'pooled' });
        const deadline = Date.now() + 30_000;
        let listed = await engine.request('GET', `/v1/sessions/${sid}/ports`);
        while (!(listed.body.ports as Array<{ port: number }>).some((p) => p.port === 8000)) {
          if (Date.now() > deadline)
            throw new Error(`port 8000 never listened: ${JSON.stringify(listed.body)}`);
          await new Promise((resolve) => setTimeout(resolve, 100));
          listed = await engine.request('GET', `/v1/sessions/${sid}/ports`);
        }
        expect(listed.body.ports).toContainEqual(
          expect.objectContaining({
            port: 8000,
            tier: 'pooled',
            process: { id: started.output.process.id, name: 'web' },
          }),
        );
        const proxy = `${engine.baseUrl}/v1/sessions/${sid}/ports/8000`;
        const hello = await fetch(`${proxy}/`);
        expect([hello.status, await hello.text()]).toEqual([200, 'hello from the session\n']);
        const echoed = await fetch(`${proxy}/echo`, { method: 'POST', body: 'x'.repeat(300_000) });
        expect((await echoed.text()).length).toBe(300_000);
        const ws = new WebSocket(`${proxy.replace('http:', 'ws:')}/ws`);
        await new Promise<void>((resolve, reject) => ws.once('open', () => resolve()).once('error', reject));
        const back = await new Promise<string>((resolve) => {
          ws.once('message', (data: Buffer) => resolve(data.toString()));
          ws.send('from the pod');
        });
        expect(back).toBe('from the pod');
        ws.close();
        const closedPort = await fetch(`${engine.baseUrl}/v1/sessions/${sid}/ports/8001/`);
        expect(closedPort.status).toBe(502);
        await engine.request('DELETE', `/v1/sessions/${sid}`);
      });

      it('opens a terminal in the session pod: its home, a server of the session, Ctrl-C, the end recorded', async () => {
        const sid = await engine.createSession();
        const server = await engine.action(sid, {
          type: 'process',
          op: 'start',
          name: 'web',
          command: 'python3 -u -m http.server 8010 --bind 127.0.0.1',
        });
        expect(server).toMatchObject({ status: 'succeeded', tier: 'pooled' });
        const opened = await engine.request('POST', `/v1/sessions/${sid}/terminals`, { cols: 100, rows: 30 });
        expect(opened.status).toBe(201);
        expect(opened.body).toMatchObject({ status: 'open', tier: 'pooled', cols: 100, rows: 30 });
        const client = await TerminalClient.connect(
          `${engine.baseUrl.replace(/^http/, 'ws')}${opened.body.wsPath}`,
          { cols: 100, rows: 30 },
        );
        client.type('echo home=$HOME cols=$(tput cols)\r');
        await client.untilLine(/^home=\/workspace\/\.home cols=100$/);
        client.type(
          `curl -sS -o /dev/null -w 'http=%{http_code}\\n' --retry 30 --retry-connrefused --retry-delay 0 ` +
            `--max-time 20 http://127.0.0.1:8010/\r`,
        );
        await client.untilLine(/^http=200$/);
        client.type('sleep 300\r');
        await new Promise((resolve) => setTimeout(resolve, 300));
        client.type('\x03');
        client.type('echo after-$((6*7))\r');
        await client.untilLine(/^after-42$/);
        client.type('exit 3\r');
        expect(await client.closed).toEqual({ code: 1000, reason: 'exit code 3' });
        const info = await engine.request('GET', `/v1/sessions/${sid}/terminals/${opened.body.id}`);
        expect(info.body).toMatchObject({ status: 'closed', exitCode: 3, endReason: 'exited' });
        const deadline = Date.now() + 15_000;
        let ends: any[] = [];
        while (ends.length === 0 && Date.now() < deadline) {
          await new Promise((resolve) => setTimeout(resolve, 100));
          const listed = await engine.request('GET', `/v1/sessions/${sid}/actions?limit=100`);
          ends = (listed.body.actions as any[]).filter(
            (a) => a.type === 'terminal' && a.inputSummary.startsWith('close '),
          );
        }
        expect(ends.map((a) => a.status)).toEqual(['succeeded']);
        await engine.request('DELETE', `/v1/sessions/${sid}`);
      });
    });
  },
);
