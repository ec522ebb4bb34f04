import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, statSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';

/**
 * `kill -9` of the engine (a real process) in the middle of a checkpoint, a restore and a fork: after the restart,
 * every checkpoint listed is whole and restores the tree it was taken of, nothing half made is left on disk, and
 * the source of a fork is writable (not left frozen).
 */
describe('checkpoints across a SIGKILL of the engine', () => {
  let dataDir: string;
  let engine: EngineProcess | undefined;
  let port: number;

  beforeAll(async () => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-checkpoint-crash-'));
    port = await freePort();
  });
  afterAll(async () => {
    await engine?.stop('SIGKILL');
    removeDataDir(dataDir);
  });

  const images = () => path.join(dataDir, 'workspaces.images');
  const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

  /** 3000 files in 30 directories, so that a checkpoint's walk takes long enough to be cut. */
  const populate = (sid: string) => {
    const ws = path.join(dataDir, 'workspaces', sid);
    for (let d = 0; d < 30; d++) {
      mkdirSync(path.join(ws, `d${d}`));
      for (let f = 0; f < 100; f++) writeFileSync(path.join(ws, `d${d}`, `f${f}`), `${d}/${f}`);
    }
    // Owned like what code writes: by the workspace's owner, the sandbox uid.
    const { uid, gid } = statSync(ws);
    execFileSync('chown', ['-R', `${uid}:${gid}`, ws]);
  };

  const api = (): EngineProcess => engine!;
  const kill = async () => {
    await engine!.stop('SIGKILL');
    engine = await EngineProcess.start(dataDir, port);
  };

  it('leaves no checkpoint half made, whenever the engine dies', async () => {
    engine = await EngineProcess.start(dataDir, port);
    const sid = await engine.createSession();
    populate(sid);
    const taken: string[] = [];
    for (const delay of [0, 5, 10, 20, 40, 80, 500]) {
      const pending = engine
        .request<{ id: string }>('POST', `/v1/sessions/${sid}/checkpoints`, {})
        .then((r) => (r.status === 201 ? taken.push(r.body.id) : undefined))
        .catch(() => undefined);
      await sleep(delay);
      await kill();
      await pending;
      const listed = (
        await engine.request<{ checkpoints: { id: string; files: number }[] }>(
          'GET',
          `/v1/sessions/${sid}/checkpoints`,
        )
      ).body.checkpoints;
      // Every acknowledged checkpoint survived; whatever is listed is whole.
      for (const id of taken) expect(listed.map((c) => c.id)).toContain(id);
      for (const c of listed) expect(c.files).toBe(3000);
      // Nothing else is on disk: each listed checkpoint is a tree and its record, and that is all.
      const store = existsSync(path.join(images(), '.roots', sid))
        ? path.join(images(), '.roots', sid, 'checkpoints')
        : path.join(images(), '.checkpoints', sid);
      expect(readdirSync(store).sort()).toEqual(listed.flatMap((c) => [c.id, `${c.id}.json`]).sort());
    }
    const listed = (await engine.request('GET', `/v1/sessions/${sid}/checkpoints`)).body.checkpoints;
    expect(listed.length).toBeGreaterThan(0);
    // Each restores the tree it was taken of.
    for (const c of listed) {
      await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'rm -rf d7 && echo changed > d1/f1',
      });
      const r = await engine.request('POST', `/v1/sessions/${sid}/checkpoints/${c.id}/restore`);
      expect({ status: r.status, body: r.status === 200 ? undefined : r.body }).toEqual({ status: 200 });
      const check = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'cat d1/f1; echo; ls d7 | wc -l; find . -type f | wc -l',
      });
      expect(check.body.stdout).toBe('1/1\n100\n3000\n');
    }
  });

  it('survives a SIGKILL during a restore and during a fork: the source stays writable, no half fork is left', async () => {
    engine ??= await EngineProcess.start(dataDir, port);
    const sid = await api().createSession();
    populate(sid);
    const cp = (await api().request('POST', `/v1/sessions/${sid}/checkpoints`, {})).body;
    await api().request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'rm -rf d*',
    });
    const restoring = api()
      .request('POST', `/v1/sessions/${sid}/checkpoints/${cp.id}/restore`)
      .catch(() => undefined);
    await sleep(15);
    await kill();
    await restoring;
    // The restore may or may not have finished; running it again completes it.
    expect((await api().request('POST', `/v1/sessions/${sid}/checkpoints/${cp.id}/restore`)).status).toBe(
      200,
    );
    const count = await api().request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'find . -type f | wc -l',
    });
    expect(count.body).toMatchObject({ status: 'succeeded', stdout: '3000\n' });

    const before = (await api().request('GET', '/v1/sessions')).body.sessions.map((s: any) => s.id);
    const forking = api()
      .request('POST', `/v1/sessions/${sid}/fork`, {})
      .catch(() => undefined);
    await sleep(20);
    await kill();
    const forked = await forking;
    const after = (await api().request('GET', '/v1/sessions')).body.sessions.map((s: any) => s.id);
    const added = after.filter((id: string) => !before.includes(id));
    // Either the fork was answered and is whole, or it left nothing.
    if (forked?.status === 201) expect(added).toEqual([forked.body.id]);
    else expect(added).toEqual([]);
    expect(readdirSync(images()).filter((n) => n.startsWith('.fork~'))).toEqual([]);
    const imagesLeft = readdirSync(images()).filter((n) => n.endsWith('.img') && !n.startsWith('.'));
    expect(imagesLeft.sort()).toEqual(after.map((id: string) => `${id}.img`).sort());
    const write = await api().request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'echo still-writable > after-crash.txt && cat after-crash.txt',
      timeoutMs: 10_000,
    });
    expect(write.body).toMatchObject({ status: 'succeeded', stdout: 'still-writable\n' });
  });
});
