import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';
import { ENGINE_MAIN, EngineProcess, freePort } from '../support/engine-process';

describe('crash and restart (the built engine as a real process)', () => {
  let dataDir: string;
  let engine: EngineProcess | undefined;

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-restart-'));
  });
  afterAll(async () => {
    await engine?.stop('SIGKILL');
    removeDataDir(dataDir);
  });

  it('marks an action killed mid-run as interrupted, and keeps the session and its graph', async () => {
    const port = await freePort();
    engine = await EngineProcess.start(dataDir, port);
    const sid = await engine.createSession();
    await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'file',
      op: 'write',
      path: 'before.txt',
      content: 'kept',
    });
    // Fire a long action and kill the engine while it runs.
    const pending = engine
      .request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'sleep 20',
        timeoutMs: 30000,
      })
      .catch(() => undefined);
    await new Promise((r) => setTimeout(r, 1000));
    await engine.stop('SIGKILL');
    await pending;

    engine = await EngineProcess.start(dataDir, port);
    const timeline = await engine.request<{
      actions: { status: string; inputSummary: string; id: string; error?: { message: string } }[];
    }>('GET', `/v1/sessions/${sid}/actions`);
    expect(timeline.body.actions.map((a) => a.status)).toEqual(['succeeded', 'interrupted']);
    const last = timeline.body.actions[1];
    const one = await engine.request<{ status: string }>('GET', `/v1/sessions/${sid}/actions/${last.id}`);
    expect(one.body.status).toBe('interrupted');
    const read = await engine.request<{ output: { content: string } }>(
      'POST',
      `/v1/sessions/${sid}/actions`,
      {
        type: 'file',
        op: 'read',
        path: 'before.txt',
      },
    );
    expect(read.body.output.content).toBe('kept');
    const graph = await engine.request<{ nodes: unknown[] }>('GET', `/v1/sessions/${sid}/graph`);
    expect(graph.body.nodes.length).toBeGreaterThanOrEqual(4);
    await engine.stop('SIGTERM');
    engine = undefined;
  });

  it('refuses to start on a bad configuration value, naming the variable', async () => {
    const proc = spawn(process.execPath, [ENGINE_MAIN], {
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
