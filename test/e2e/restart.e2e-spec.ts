import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';

const MAIN = path.join(__dirname, '..', '..', 'dist', 'apps', 'engine', 'src', 'main.js');

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });

async function startEngine(dataDir: string, port: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, [MAIN], {
    env: { ...process.env, PORT: String(port), SWITCHYARD_DATA_DIR: dataDir, SWITCHYARD_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  const deadline = Date.now() + 20_000;
  while (Date.now() < deadline) {
    try {
      if ((await fetch(`http://127.0.0.1:${port}/health`)).ok) return child;
    } catch {
      /* not up yet */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  child.kill('SIGKILL');
  throw new Error('engine did not start');
}

describe('crash and restart (the built engine as a real process)', () => {
  let dataDir: string;
  let child: ChildProcess | undefined;

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-restart-'));
  });
  afterAll(() => {
    child?.kill('SIGKILL');
    removeDataDir(dataDir);
  });

  it('marks an action killed mid-run as interrupted, and keeps the session and its graph', async () => {
    const port = await freePort();
    child = await startEngine(dataDir, port);
    const base = `http://127.0.0.1:${port}`;
    const sid = ((await (await fetch(`${base}/v1/sessions`, { method: 'POST' })).json()) as { id: string })
      .id;
    await fetch(`${base}/v1/sessions/${sid}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'file', op: 'write', path: 'before.txt', content: 'kept' }),
    });
    // Fire a long action and kill the engine while it runs.
    const pending = fetch(`${base}/v1/sessions/${sid}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'code', language: 'bash', code: 'sleep 20', timeoutMs: 30000 }),
    }).catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1000));
    child.kill('SIGKILL');
    await pending;
    await new Promise((r) => child!.once('exit', r));

    child = await startEngine(dataDir, port);
    const timeline = (await (await fetch(`${base}/v1/sessions/${sid}/actions`)).json()) as {
      actions: { status: string; inputSummary: string; id: string; error?: { message: string } }[];
    };
    expect(timeline.actions.map((a) => a.status)).toEqual(['succeeded', 'interrupted']);
    const last = timeline.actions[1];
    const one = (await (await fetch(`${base}/v1/sessions/${sid}/actions/${last.id}`)).json()) as {
      status: string;
    };
    expect(one.status).toBe('interrupted');
    const read = await fetch(`${base}/v1/sessions/${sid}/actions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ type: 'file', op: 'read', path: 'before.txt' }),
    });
    expect(((await read.json()) as { output: { content: string } }).output.content).toBe('kept');
    const graph = (await (await fetch(`${base}/v1/sessions/${sid}/graph`)).json()) as { nodes: unknown[] };
    expect(graph.nodes.length).toBeGreaterThanOrEqual(4);
    child.kill('SIGTERM');
    await new Promise((r) => child!.once('exit', r));
    child = undefined;
  });

  it('refuses to start on a bad configuration value, naming the variable', async () => {
    const proc = spawn(process.execPath, [MAIN], {
      env: { ...process.env, PORT: 'eighty', SWITCHYARD_DATA_DIR: dataDir },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stderr = '';
    proc.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const code = await new Promise((r) => proc.once('exit', r));
    expect(code).toBe(78);
    expect(stderr).toContain('PORT');
  });
});
