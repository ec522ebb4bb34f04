import { ConsoleLogger } from '@nestjs/common';
import { type ChildProcess, execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';

const MAIN = path.join(__dirname, '..', '..', 'dist', 'apps', 'engine', 'src', 'main.js');
const MiB = 2 ** 20;

/** Containers (any state) whose engine label belongs to process `pid` of this host. */
function containersOfEngine(pid: number): string[] {
  const out = execFileSync(
    'docker',
    [
      'ps',
      '-a',
      '--filter',
      'label=dev.switchyard.engine',
      '--format',
      '{{.ID}} {{.Label "dev.switchyard.engine"}}',
    ],
    { encoding: 'utf8' },
  );
  return out
    .split('\n')
    .filter((line) => line.includes(`:${pid}:`))
    .map((line) => line.split(' ')[0]);
}

const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
    srv.on('error', reject);
  });

describe('container tiers: configuration and lifecycle', () => {
  it('says at start-up that the image is missing and how to build it; container actions are denied naming it', async () => {
    const warn = jest.spyOn(ConsoleLogger.prototype, 'warn');
    const image = `switchyard/sandbox:missing-${process.pid}`;
    const engine = await EngineHarness.start({ SWITCHYARD_SANDBOX_IMAGE: image, SWITCHYARD_POOL_MIN: '0' });
    try {
      const warnings = warn.mock.calls.map((args) => JSON.stringify(args[0]));
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
      warn.mockRestore();
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

  describe('SIGTERM (the built engine as a real process)', () => {
    let dataDir: string;
    let child: ChildProcess | undefined;
    beforeAll(() => {
      dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-sigterm-'));
    });
    afterAll(() => {
      child?.kill('SIGKILL');
      rmSync(dataDir, { recursive: true, force: true });
    });

    it('cancels in-flight actions, removes every container of the engine and exits', async () => {
      const port = await freePort();
      child = spawn(process.execPath, [MAIN], {
        env: {
          ...process.env,
          PORT: String(port),
          SWITCHYARD_DATA_DIR: dataDir,
          SWITCHYARD_LOG_LEVEL: 'error',
          SWITCHYARD_POOL_MIN: '1',
        },
        stdio: ['ignore', 'ignore', 'inherit'],
      });
      const pid = child.pid!;
      // Nest re-raises the signal once shutdown is done, so a clean stop ends by SIGTERM rather than exit 0.
      const exited = new Promise<string>((resolve) =>
        child!.once('exit', (code, signal) => resolve(signal ?? `exit ${code}`)),
      );
      const base = `http://127.0.0.1:${port}`;
      const deadline = Date.now() + 20_000;
      for (;;) {
        const up = await fetch(`${base}/health`).then(
          (r) => r.ok,
          () => false,
        );
        if (up) break;
        if (Date.now() > deadline) throw new Error('engine did not start');
        await new Promise((r) => setTimeout(r, 100));
      }
      const post = (p: string, body?: unknown): Promise<any> =>
        fetch(`${base}${p}`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: body === undefined ? undefined : JSON.stringify(body),
        }).then((r) => r.json());
      const sid = ((await post('/v1/sessions')) as { id: string }).id;
      const warm = await post(`/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'echo warm',
        tier: 'pooled',
      });
      expect(warm.status).toBe('succeeded');
      const inFlight = post(`/v1/sessions/${sid}/actions`, {
        type: 'code',
        language: 'bash',
        code: 'sleep 60',
        tier: 'container',
        timeoutMs: 60_000,
      });
      // Wait until the one-off container exists, so the signal lands mid-action.
      const until = Date.now() + 15_000;
      while (containersOfEngine(pid).length < 2 && Date.now() < until)
        await new Promise((r) => setTimeout(r, 100));
      expect(containersOfEngine(pid).length).toBeGreaterThanOrEqual(2);

      child.kill('SIGTERM');
      const answer = await inFlight;
      expect(answer).toMatchObject({
        status: 'cancelled',
        error: { class: 'cancelled', message: 'cancelled: engine shutting down' },
      });
      expect(await exited).toBe('SIGTERM');
      expect(containersOfEngine(pid)).toEqual([]);
    }, 60_000);
  });
});
