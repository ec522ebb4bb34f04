import { execFileSync } from 'node:child_process';
import * as path from 'node:path';
import { CONTAINER_OPTIONS, LABEL_ENGINE, type ResolvedContainerOptions } from '@switchyard/sandbox';
import Dockerode from 'dockerode';
import { EngineHarness } from '../support/engine-harness';

const DOCKER_ENGINE = path.join(__dirname, '..', '..', 'scripts', 'docker-engine.sh');
const dockerEngine = (command: 'start' | 'stop'): void => {
  const said = execFileSync('bash', [DOCKER_ENGINE, command], { encoding: 'utf8', timeout: 90_000 });
  // The script stops only the dockerd it started (its pid file): one started otherwise (another checkout's) stays.
  if (command === 'stop' && said.includes('no dockerd started by this script')) {
    throw new Error(
      "this checkout's scripts/docker-engine.sh did not start the running dockerd, so it cannot stop it: stop that " +
        'one (bash <its checkout>/scripts/docker-engine.sh stop) and start one here (bash scripts/docker-engine.sh)',
    );
  }
};

async function until<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

/**
 * Docker lost while the engine runs, then back (the dockerd `npm test` started is stopped and started again): the
 * container tiers say so and deny, then recover by themselves.
 */
describe('Docker outage and recovery', () => {
  let engine: EngineHarness;
  afterAll(async () => {
    dockerEngine('start'); // whatever happened, later suites need Docker
    await engine?.stop();
  });

  it('reports the container tiers unavailable, denies their actions, and recovers when Docker returns', async () => {
    engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '1' });
    const sid = await engine.createSession();
    const pooled = (s: string): Promise<any> =>
      engine.action(s, { type: 'code', language: 'bash', code: 'echo ok', tier: 'pooled' });
    const oneOff = (s: string): Promise<any> =>
      engine.action(s, { type: 'code', language: 'bash', code: 'echo ok', tier: 'container' });
    expect((await pooled(sid)).status).toBe('succeeded');

    dockerEngine('stop');
    const health = await until('health to report Docker down', async () => {
      const h = (await engine.request('GET', '/health')).body;
      return !h.tiers.pooled.available && !h.tiers.container.available ? h : undefined;
    });
    expect(health.tiers.pooled.reason).toMatch(/Docker/);
    expect(health.tiers.container.reason).toMatch(/Docker/);
    expect(health.tiers.subprocess.available).toBe(true);
    const notReady = await engine.request('GET', '/health/ready');
    expect(notReady.status).toBe(503);
    expect(notReady.body.error).toMatchObject({
      code: 'NOT_READY',
      message: expect.stringContaining('docker ('),
    });
    expect(notReady.body.error.details.indicators.docker.status).toBe('down');
    expect(notReady.body.error.details.indicators.bubblewrap.status).toBe('up');
    for (const run of [pooled, oneOff]) {
      const r = await run(sid);
      expect(r).toMatchObject({ status: 'denied', error: { class: 'policy', code: 'TIER_UNAVAILABLE' } });
      expect(r.error.message).toMatch(/Docker/);
    }
    // The subprocess tier does not depend on Docker.
    const sub = await engine.action(sid, { type: 'code', language: 'bash', code: 'echo sub' });
    expect(sub).toMatchObject({ status: 'succeeded', tier: 'subprocess' });

    dockerEngine('start');
    await until('the pooled tier to recover', async () => {
      const h = (await engine.request('GET', '/health')).body;
      return h.tiers.pooled.available && h.tiers.container.available ? true : undefined;
    });
    // The session's old container died with the daemon: its next action gets a fresh one, as does a new session.
    const again = await until('a pooled action to succeed', async () => {
      const r = await pooled(sid);
      return r.status === 'succeeded' ? r : undefined;
    });
    expect(again.stdout).toBe('ok\n');
    expect((await pooled(await engine.createSession())).status).toBe('succeeded');
    expect((await oneOff(sid)).status).toBe('succeeded');
    expect((await engine.request('GET', '/health/ready')).status).toBe(200);

    // The daemon went away with creates in flight (the pool refilling): stopped, the engine leaves no container.
    const engineId = engine.app.get<ResolvedContainerOptions>(CONTAINER_OPTIONS).engineInstanceId;
    await engine.stop();
    const left = await new Dockerode().listContainers({
      all: true,
      filters: { label: [`${LABEL_ENGINE}=${engineId}`] },
    });
    expect(left.map((c) => `${c.Id.slice(0, 12)} ${c.State} ${JSON.stringify(c.Labels)}`)).toEqual([]);
  }, 180_000);
});
