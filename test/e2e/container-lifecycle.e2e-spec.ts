import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { EngineHarness, LogCapture } from '../support/engine-harness';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';

const MiB = 2 ** 20;

/** Containers (any state, of one tier when given) whose engine label belongs to process `pid` of this host. */
function containersOfEngine(pid: number, tier?: 'pooled' | 'container', ofAnAction = false): string[] {
  const out = execFileSync(
    'docker',
    [
      'ps',
      '-a',
      ...(ofAnAction ? ['--filter', 'label=dev.switchyard.action'] : []),
      '--filter',
      tier ? `label=dev.switchyard.tier=${tier}` : 'label=dev.switchyard.engine',
      '--format',
      '{{.ID}} {{.Label "dev.switchyard.engine"}}',
    ],
    { encoding: 'utf8', timeout: 30_000 },
  );
  return out
    .split('\n')
    .filter((line) => line.includes(`:${pid}:`))
    .map((line) => line.split(' ')[0]);
}

describe('container tiers: configuration and lifecycle', () => {
  it('says at start-up that the image is missing and how to build it; container actions are denied naming it', async () => {
    const logs = new LogCapture();
    const image = `switchyard/sandbox:missing-${process.pid}`;
    const engine = await EngineHarness.start(
      { SWITCHYARD_SANDBOX_IMAGE: image, SWITCHYARD_POOL_MIN: '0', SWITCHYARD_LOG_LEVEL: 'warn' },
      { logs },
    );
    try {
      const warnings = logs.lines.filter((l) => l.level === 40).map((l) => JSON.stringify(l));
      for (const tier of ['pooled', 'container']) {
        expect(warnings).toContainEqual(expect.stringContaining(`"tier":"${tier}"`));
      }
      expect(warnings.filter((w) => w.includes('npm run sandbox:image')).length).toBeGreaterThanOrEqual(2);

      const health = (await engine.request('GET', '/health')).body;
      expect(health.tiers.container.available).toBe(false);
      expect(health.tiers.container.reason).toContain(image);
      expect(health.tiers.pooled.reason).toContain('npm run sandbox:image');

      const sid = await engine.createSession();
      for (const tier of ['pooled', 'container']) {
        const r = await engine.action(sid, { type: 'code', language: 'bash', code: 'echo hi', tier });
        expect(r).toMatchObject({
          status: 'denied',
          tier,
          error: { class: 'policy', code: 'TIER_UNAVAILABLE' },
        });
        expect(r.error.message).toContain(image);
      }
    } finally {
      await engine.stop();
    }
  });

  it('applies the per-tier limits from the environment', async () => {
    const engine = await EngineHarness.start({
      SWITCHYARD_DEFAULT_TIMEOUT_MS: '5000',
      SWITCHYARD_POOLED_MAX_TIMEOUT_MS: '5000',
      SWITCHYARD_CONTAINER_OUTPUT_MAX_BYTES: '2048',
      SWITCHYARD_CONTAINER_MEMORY_BYTES: String(64 * MiB),
      SWITCHYARD_POOL_MIN: '1',
    });
    try {
      const sid = await engine.createSession();
      const code = (tier: string, source: string, timeoutMs?: number): Promise<any> =>
        engine.action(sid, { type: 'code', language: 'python', code: source, tier, timeoutMs });

      const tooLong = await code('pooled', 'print(1)', 8000);
      expect(tooLong).toMatchObject({ status: 'denied', error: { code: 'TIMEOUT_ABOVE_TIER_MAX' } });
      expect(tooLong.error.message).toContain('5000');
      expect((await code('container', 'print(1)', 8000)).status).toBe('succeeded');

      const flood = await code('container', 'print("x" * 10000)');
      expect(flood.truncated.stdout).toBe(true);
      expect(Buffer.byteLength(flood.stdout)).toBeLessThanOrEqual(2048);
      expect((await code('pooled', 'print("x" * 10000)')).stdout).toHaveLength(10001);

      const hog = 'b = bytearray(100 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\nprint("kept")';
      expect(await code('container', hog)).toMatchObject({ status: 'failed', error: { class: 'limit' } });
      expect(await code('pooled', hog)).toMatchObject({ status: 'succeeded', stdout: 'kept\n' });
    } finally {
      await engine.stop();
    }
  }, 60_000);

  it('refuses a session beyond SWITCHYARD_POOL_MAX_SESSIONS as a recorded denial naming the setting', async () => {
    const engine = await EngineHarness.start({ SWITCHYARD_POOL_MIN: '1', SWITCHYARD_POOL_MAX_SESSIONS: '1' });
    try {
      const first = await engine.createSession();
      const second = await engine.createSession();
      const pooled = { type: 'code', language: 'bash', code: 'echo held', tier: 'pooled' };
      expect(await engine.action(first, pooled)).toMatchObject({ status: 'succeeded', tier: 'pooled' });
      const refused = await engine.action(second, pooled);
      expect(refused).toMatchObject({
        status: 'denied',
        tier: 'pooled',
        error: { class: 'limit', code: 'POOL_SESSIONS_EXHAUSTED' },
      });
      expect(refused.error.message).toContain('SWITCHYARD_POOL_MAX_SESSIONS');
      const recorded = await engine.request('GET', `/v1/sessions/${second}/actions/${refused.id}`);
      expect(recorded.body).toMatchObject({ status: 'denied', error: { class: 'limit' } });
      // Once the first session ends, its container is released and the second one gets one.
      await engine.request('DELETE', `/v1/sessions/${first}`);
      expect(await engine.action(second, pooled)).toMatchObject({ status: 'succeeded', tier: 'pooled' });
    } finally {
      await engine.stop();
    }
  }, 60_000);

  describe('SIGTERM (the built engine as a real process)', () => {
    let dataDir: string;
    let engine: EngineProcess | undefined;
    beforeAll(() => {
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-sigterm-'));
    });
    afterAll(async () => {
      await engine?.stop('SIGKILL');
      removeDataDir(dataDir);
    });

    it('cancels in-flight actions, removes every container of the engine and exits', async () => {
      const port = await freePort();
      engine = await EngineProcess.start(dataDir, port, {
        SWITCHYARD_LOG_LEVEL: 'error',
        SWITCHYARD_POOL_MIN: '1',
      });
      const { pid, baseUrl: base } = engine;
      const sid = await engine.createSession();
      const warm = await engine.request('POST', `/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'echo warm',
        tier: 'pooled',
      });
      expect(warm.body.status).toBe('succeeded');
      // Its own connection (no keep-alive reuse): the answer must come back on it after the signal.
      const inFlight = new Promise<any>((resolve, reject) => {
        const payload = JSON.stringify({
          type: 'code',
          language: 'bash',
          code: 'sleep 60',
          tier: 'container',
          timeoutMs: 60_000,
        });
        const req = http.request(
          `${base}/v1/sessions/${sid}/actions`,
          {
            method: 'POST',
            agent: false,
            headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) },
          },
          (res) => {
            let text = '';
            res.on('data', (d: Buffer) => (text += d.toString()));
            res.on('end', () => resolve(JSON.parse(text)));
          },
        );
        req.on('error', reject);
        req.end(payload);
      });
      // Wait until the action's one-off container exists, so the signal lands mid-action (on gVisor the engine's
      // probe of its runsc may have a container of the tier too: it names no action).
      const until = Date.now() + 15_000;
      while (containersOfEngine(pid, 'container', true).length === 0 && Date.now() < until) {
        await new Promise((r) => setTimeout(r, 100));
      }
      expect(containersOfEngine(pid, 'container', true).length).toBeGreaterThanOrEqual(1);
      expect(containersOfEngine(pid, 'pooled').length).toBeGreaterThanOrEqual(1);

      engine.child.kill('SIGTERM');
      const t0 = Date.now();
      // The caller gets its answer before the engine exits.
      expect((await inFlight).status).toBe('cancelled');
      // Nest re-raises the signal once shutdown is done, so a clean stop ends by SIGTERM rather than exit 0.
      expect(await engine.exited).toBe('SIGTERM');
      expect(Date.now() - t0).toBeLessThan(15_000); // 5 s grace, then cancel and clean up
      expect(containersOfEngine(pid)).toEqual([]);

      // Restarted on the same data dir: the action was recorded as cancelled before the exit (not `interrupted`).
      engine = await EngineProcess.start(dataDir, await freePort(), { SWITCHYARD_LOG_LEVEL: 'error' });
      const timeline = (await engine.request<{ actions: any[] }>('GET', `/v1/sessions/${sid}/actions`)).body;
      const statuses = timeline.actions.map((a) => a.status);
      expect(statuses).toEqual(['succeeded', 'cancelled']);
      expect(timeline.actions[1].error).toMatchObject({
        class: 'cancelled',
        message: 'cancelled: engine shutting down',
      });
    }, 60_000);
  });
});
