import { spawn, spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { defaultEngineInstanceId } from '../../libs/sandbox/src/core/engine-instance';
import { parseMountInfo } from '../../libs/sandbox/src/backends/docker/pooled/host-mounts';
import { removeDataDir } from '../support/data-dir';
import { ENGINE_MAIN, EngineProcess, freePort } from '../support/engine-process';
import {
  containerExists,
  containersWith,
  docker,
  eventually,
  forceRemove,
  LABELS,
  loopsUnder,
} from '../support/host-probes';

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

/**
 * SECURITY.md #17: nothing of a killed or stopped engine stays behind. One-off containers are found by their labels
 * (engine `<host>:<pid>:<start ticks>:<instance>`, session, tier `container`), the pooled mount root in
 * /proc/self/mountinfo.
 */
describe('a killed or stopped engine leaves nothing', () => {
  jest.setTimeout(180_000);
  let dataDir: string;
  let engine: EngineProcess | undefined;
  const strays: string[] = [];

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-leftovers-'));
  });
  afterAll(async () => {
    await engine?.stop('SIGKILL');
    await forceRemove(strays);
    removeDataDir(dataDir);
  });

  /** One-off containers (any state) whose engine label names process `pid` of this host. */
  const oneOffsOf = async (pid: number) =>
    (await containersWith({ [LABELS.tier]: 'container' })).filter((c) =>
      c.labels[LABELS.engine]?.includes(`:${pid}:`),
    );

  it('the successor reaps every one-off container of the killed engine, though their session is still live', async () => {
    const env = { SWITCHYARD_POOL_MIN: '0', SWITCHYARD_LOG_LEVEL: 'error' };
    const first = await EngineProcess.start(dataDir, await freePort(), env);
    engine = first;
    const sid = await first.createSession({ maxConcurrentActions: 4 });
    for (let i = 0; i < 3; i++) {
      const accepted = await first.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: `sleep 120 # ${i}`,
        tier: 'container',
        timeoutMs: 120_000,
        wait: false,
      });
      expect(accepted.status).toBe(202);
    }
    // All three run in their own containers when the engine dies.
    const running = async () =>
      (await oneOffsOf(first.pid)).filter((c) => c.state === 'running').length === 3;
    expect(await eventually(running, 60_000, 200)).toBe(true);
    await first.stop('SIGKILL');
    expect(await oneOffsOf(first.pid)).toHaveLength(3);

    engine = await EngineProcess.start(dataDir, await freePort(), env);
    // The session lives on; its three actions were interrupted with the engine, and their containers go.
    expect((await engine.request('GET', `/v1/sessions/${sid}`)).status).toBe(200);
    const timeline = await engine.request<{ actions: Array<{ status: string }> }>(
      'GET',
      `/v1/sessions/${sid}/actions`,
    );
    expect(timeline.body.actions.map((a) => a.status)).toEqual(['interrupted', 'interrupted', 'interrupted']);
    expect(await eventually(async () => (await oneOffsOf(first.pid)).length === 0, 20_000, 200)).toBe(true);
    expect((await engine.request('GET', `/v1/sessions/${sid}`)).status).toBe(200);
  });

  it('deleting a session removes every one-off container labelled with it, not only those the engine tracks', async () => {
    engine ??= await EngineProcess.start(dataDir, await freePort(), { SWITCHYARD_POOL_MIN: '0' });
    const sid = await engine.createSession();
    const other = await engine.createSession();
    const ran = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'echo ran',
      tier: 'container',
    });
    expect(ran.body).toMatchObject({ status: 'succeeded', tier: 'container' });
    // Containers this engine never started: another engine of this host, alive (a replica sharing the daemon, here
    // this test's process, so that no engine's reaper takes them), runs one for each session.
    const health = await engine.request<{ tiers: { container: { details: { image: string } } } }>(
      'GET',
      '/health',
    );
    const image = health.body.tiers.container.details.image;
    const leftover = async (session: string) => {
      const id = (
        await docker(
          'run',
          '-d',
          '--network',
          'none',
          '--label',
          `${LABELS.tier}=container`,
          '--label',
          `${LABELS.engine}=${defaultEngineInstanceId(process.pid)}`,
          '--label',
          `${LABELS.session}=${session}`,
          '--entrypoint',
          'sleep',
          image,
          '120',
        )
      ).trim();
      strays.push(id);
      return id;
    };
    const ofDeleted = await leftover(sid);
    const ofOther = await leftover(other);

    expect((await engine.request('DELETE', `/v1/sessions/${sid}`)).status).toBe(204);
    // Removed in the background, right after the answer.
    expect(await eventually(async () => !(await containerExists(ofDeleted)), 10_000, 50)).toBe(true);
    expect(await containerExists(ofOther)).toBe(true); // another session's: not this delete's business
    expect((await engine.request('DELETE', `/v1/sessions/${other}`)).status).toBe(204);
    expect(await eventually(async () => !(await containerExists(ofOther)), 10_000, 50)).toBe(true);
  });

  it('DELETE answers before the teardown: an engine killed right after leaves what its successor removes; SIGTERM finishes it', async () => {
    await engine?.stop('SIGKILL');
    const mountRoot = mkdtempSync(path.join(os.tmpdir(), 'switchyard-pooled-root-'));
    const env = {
      SWITCHYARD_POOL_MIN: '0',
      SWITCHYARD_POOL_MOUNT_ROOT: mountRoot,
      SWITCHYARD_LOG_LEVEL: 'error',
    };
    const mountsOfRoot = () =>
      parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
        .map((m) => m.target)
        .filter((t) => t.startsWith(`${mountRoot}/`));
    /** What a session holds on this host: its pooled container (the engine's only one), mounts, workspace, loop. */
    const holdings = async (pid: number, sid: string) => ({
      containers: (await containersWith({ [LABELS.tier]: 'pooled' })).filter((c) =>
        c.labels[LABELS.engine]?.includes(`:${pid}:`),
      ).length,
      mounts: mountsOfRoot().length,
      workspace: existsSync(path.join(dataDir, 'workspaces', sid)),
      loops: loopsUnder(dataDir).filter((l) => l.backingFile.includes(sid)).length,
    });
    const nothing = { containers: 0, mounts: 0, workspace: false, loops: 0 };
    /** A session that ran in its own pooled container. */
    const sessionWithContainer = async (on: EngineProcess): Promise<string> => {
      const sid = await on.createSession();
      const ran = await on.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'echo ran > ran.txt',
        tier: 'pooled',
      });
      expect(ran.body).toMatchObject({ status: 'succeeded', tier: 'pooled' });
      return sid;
    };
    try {
      const first = await EngineProcess.start(dataDir, await freePort(), env);
      engine = first;
      const sid = await sessionWithContainer(first);
      expect(await holdings(first.pid, sid)).toMatchObject({ containers: 1, workspace: true });

      expect((await first.request('DELETE', `/v1/sessions/${sid}`)).status).toBe(204);
      await first.stop('SIGKILL');
      // Killed this soon, the teardown (container, then mounts, then workspace) had not finished.
      const left = await holdings(first.pid, sid);
      expect(left.workspace).toBe(true);

      engine = await EngineProcess.start(dataDir, await freePort(), env);
      expect((await engine.request('GET', `/v1/sessions/${sid}`)).status).toBe(404);
      const reaped = async () => JSON.stringify(await holdings(first.pid, sid)) === JSON.stringify(nothing);
      expect(await eventually(reaped, 20_000, 200)).toBe(true);

      // SIGTERM right after a DELETE: the engine finishes the teardown before it exits.
      const second = engine;
      const other = await sessionWithContainer(second);
      expect((await second.request('DELETE', `/v1/sessions/${other}`)).status).toBe(204);
      expect(
        (
          await second.request('POST', `/v1/sessions/${other}/actions`, {
            type: 'code',
            language: 'bash',
            code: 'true',
          })
        ).status,
      ).toBe(404);
      await second.stop('SIGTERM');
      engine = undefined;
      expect(await holdings(second.pid, other)).toEqual(nothing);
    } finally {
      for (const m of mountsOfRoot().reverse()) spawnSync('umount', ['-l', m]);
      spawnSync('umount', ['-l', mountRoot]);
      rmSync(mountRoot, { recursive: true, force: true });
    }
  });

  it('after SIGTERM, no mount of the pooled mount root remains', async () => {
    await engine?.stop('SIGTERM');
    const mountRoot = mkdtempSync(path.join(os.tmpdir(), 'switchyard-pooled-root-'));
    const mountsOfRoot = () =>
      parseMountInfo(readFileSync('/proc/self/mountinfo', 'utf8'))
        .map((m) => m.target)
        .filter((t) => t === mountRoot || t.startsWith(`${mountRoot}/`));
    try {
      engine = await EngineProcess.start(dataDir, await freePort(), {
        SWITCHYARD_POOL_MIN: '1',
        SWITCHYARD_POOL_MOUNT_ROOT: mountRoot,
        SWITCHYARD_LOG_LEVEL: 'error',
      });
      const sid = await engine.createSession();
      const pooled = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'echo pooled > made-here.txt',
        tier: 'pooled',
      });
      expect(pooled.body).toMatchObject({ status: 'succeeded', tier: 'pooled' });
      // While it runs: the root's self-bind, and the session's workspace bound below it.
      expect(mountsOfRoot()).toContain(mountRoot);
      expect(mountsOfRoot().length).toBeGreaterThanOrEqual(2);

      const pid = engine.pid;
      await engine.stop('SIGTERM');
      engine = undefined;
      expect(mountsOfRoot()).toEqual([]);
      const ofEngine = (await containersWith({ [LABELS.engine]: true })).filter((c) =>
        c.labels[LABELS.engine].includes(`:${pid}:`),
      );
      expect(ofEngine).toEqual([]);
    } finally {
      // A failed run must not leave its mounts: deepest first, lazily.
      for (const m of mountsOfRoot().reverse()) spawnSync('umount', ['-l', m]);
      rmSync(mountRoot, { recursive: true, force: true });
    }
  });
});
