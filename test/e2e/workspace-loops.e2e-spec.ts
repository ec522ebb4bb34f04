import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';
import { eventually, loopsUnder, mountSourceDevice } from '../support/host-probes';

/** Block device `major:minor` (a loop device's for a workspace image, ext4 or btrfs) → mount points, from a mountinfo. */
function mountsIn(mountinfo: string): Map<string, string[]> {
  const byDevice = new Map<string, string[]>();
  for (const fields of mountinfo.split('\n').map((l) => l.split(' '))) {
    if (fields.length < 10) continue;
    const device = mountSourceDevice(fields);
    byDevice.set(device, [...(byDevice.get(device) ?? []), fields[4]]);
  }
  return byDevice;
}

/**
 * SECURITY.md item 23 for capped workspaces: each is a loop-mounted image (btrfs or ext4), and a sandbox's mount namespace
 * copies the engine's mounts. A real engine process is killed with SIGKILL while its sessions' workspaces are mounted
 * and a namespace copied from the host's (what a sandbox stuck before it pivots holds) outlives it; the successor on
 * the same data dir must leave no loop device attached to an image it does not mount, and the sessions must work.
 */
describe('workspace loop devices across a SIGKILL (the built engine as a real process)', () => {
  let dataDir: string;
  let engine: EngineProcess | undefined;
  let stuck: ChildProcess | undefined;

  beforeAll(() => {
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-loops-'));
  });
  afterAll(async () => {
    await engine?.stop('SIGKILL');
    if (stuck?.exitCode === null) {
      stuck.kill('SIGKILL');
      await new Promise((r) => stuck!.once('exit', r));
    }
    removeDataDir(dataDir);
  });

  const workspaces = () => path.join(dataDir, 'workspaces');
  const hostMounts = () => mountsIn(readFileSync('/proc/self/mountinfo', 'utf8'));
  /** Loop devices of this engine's images that the host does not mount: what must never outlive a start-up. */
  const stray = () => loopsUnder(dataDir).filter((l) => !hostMounts().has(l.device));
  /** Loop devices of sessions' images (not of the spares the engine keeps formatted and mounted ahead). */
  const sessionLoops = () => loopsUnder(dataDir).filter((l) => !l.backingFile.includes('/.pool/'));
  const deviceOf = (sid: string) =>
    [...hostMounts()].find(([, targets]) => targets.includes(path.join(workspaces(), sid)))?.[0];
  const run = async (sid: string, tier: string, code: string) => {
    const res = await engine!.request('POST', `/v1/sessions/${sid}/actions`, {
      type: 'code',
      language: 'bash',
      code,
      tier,
      timeoutMs: 20_000,
    });
    expect(res.body).toMatchObject({ status: 'succeeded', tier });
    return res.body.stdout as string;
  };
  /** The session's note, and the loop devices the sandbox sees mounted (major 7). */
  const look = async (sid: string, tier: string) => {
    const out = await run(sid, tier, 'cat note.txt; echo; cat /proc/self/mountinfo');
    const [note, ...mountinfo] = out.split('\n');
    const loops = [...mountsIn(mountinfo.join('\n'))].filter(([device]) => device.startsWith('7:'));
    return { note, loops };
  };

  it('leaves no loop device of an image it does not mount, and the sessions keep working', async () => {
    const port = await freePort();
    engine = await EngineProcess.start(dataDir, port, { SWITCHYARD_WORKSPACE_QUOTA: 'loop' });
    const sessions: string[] = [];
    for (let i = 0; i < 4; i++) sessions.push(await engine.createSession());
    for (const sid of sessions) {
      const write = { type: 'file', op: 'write', path: 'note.txt', content: sid };
      expect((await engine.request('POST', `/v1/sessions/${sid}/actions`, write)).status).toBe(200);
      // Each sandbox sees exactly one workspace mounted, its own, at /workspace (other sessions' are mounted on the
      // host at the same time).
      for (const tier of ['subprocess', 'pooled']) {
        const seen = await look(sid, tier);
        expect(seen.note).toBe(sid);
        expect(seen.loops).toEqual([[deviceOf(sid), ['/workspace']]]);
      }
    }
    expect(sessionLoops()).toHaveLength(4);

    // A namespace copied from the host's while every workspace is mounted, outliving the engine.
    stuck = spawn('unshare', ['-U', '-m', '--propagation', 'slave', '--map-root-user', 'sleep', '600'], {
      stdio: 'ignore',
    });
    const stuckMounts = () => mountsIn(readFileSync(`/proc/${stuck!.pid}/mountinfo`, 'utf8'));
    expect(await eventually(() => sessions.every((s) => stuckMounts().has(deviceOf(s)!)), 5000)).toBe(true);

    // Deleting a session frees its loop device, though that namespace saw its workspace mounted.
    const [gone, ...kept] = sessions;
    const goneDevice = deviceOf(gone)!;
    expect((await engine.request('DELETE', `/v1/sessions/${gone}`)).status).toBe(204);
    expect(await eventually(() => !loopsUnder(dataDir).some((l) => l.device === goneDevice), 5000)).toBe(
      true,
    );
    expect(stuckMounts().has(goneDevice)).toBe(false);

    // Killed with actions in flight in both tiers.
    const inFlight = [
      run(kept[0], 'subprocess', 'sleep 30').catch(() => undefined),
      run(kept[1], 'pooled', 'sleep 30').catch(() => undefined),
    ];
    await new Promise((r) => setTimeout(r, 1500));
    const before = new Set(loopsUnder(dataDir).map((l) => l.device));
    await engine.stop('SIGKILL');
    await Promise.all(inFlight);

    engine = await EngineProcess.start(dataDir, port, { SWITCHYARD_WORKSPACE_QUOTA: 'loop' });
    // The dead engine's pooled containers keep their binds until the successor's reaper removes them.
    expect(await eventually(() => stray().length === 0, 20_000)).toBe(true);
    // The stuck namespace no longer holds any of them.
    expect([...before].filter((d) => stuckMounts().has(d))).toEqual([]);
    expect(sessionLoops()).toHaveLength(kept.length);

    const stillWork = async () => {
      for (const sid of kept) {
        const read = await engine!.request('POST', `/v1/sessions/${sid}/actions`, {
          type: 'file',
          op: 'read',
          path: 'note.txt',
        });
        expect(read.body.output.content).toBe(sid);
        for (const tier of ['subprocess', 'pooled']) {
          expect(await look(sid, tier)).toEqual({ note: sid, loops: [[deviceOf(sid), ['/workspace']]] });
        }
      }
    };
    await stillWork();

    // A clean stop unmounts the workspaces, and their loop devices go: nothing else holds them.
    const noMountsLeft = () => [...hostMounts().values()].flat().filter((t) => t.startsWith(`${dataDir}/`));
    await engine.stop('SIGTERM');
    expect(await eventually(() => loopsUnder(dataDir).length === 0, 10_000)).toBe(true);
    expect(noMountsLeft()).toEqual([]);

    engine = await EngineProcess.start(dataDir, port, { SWITCHYARD_WORKSPACE_QUOTA: 'loop' });
    await stillWork();
    for (const sid of kept) expect((await engine.request('DELETE', `/v1/sessions/${sid}`)).status).toBe(204);
    expect(await eventually(() => sessionLoops().length === 0, 10_000)).toBe(true);
    await engine.stop('SIGTERM');
    engine = undefined;
    expect(noMountsLeft()).toEqual([]);
  }, 180_000);
});
