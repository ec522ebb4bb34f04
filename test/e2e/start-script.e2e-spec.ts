import { execFileSync, spawn } from 'node:child_process';
import { mkdtempSync, statSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';
import { freePort } from '../support/engine-process';

const ROOT = path.resolve(__dirname, '../..');
const MAIN = path.join(ROOT, 'dist/apps/engine/src/main.js');

describe('npm start', () => {
  it('does not wipe and rebuild dist/ when the sources are unchanged since the last build', () => {
    // `npm test` built dist/ (through the same script) before the tests: a start now must reuse it as it is, so an
    // engine already running from this checkout keeps its files.
    const before = statSync(MAIN).mtimeMs;
    const out = execFileSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--if-changed'], {
      cwd: ROOT,
      encoding: 'utf8',
    });
    expect(out).toContain('sources unchanged');
    expect(statSync(MAIN).mtimeMs).toBe(before);
  });

  it('sets up every tier before the engine starts, and on a set-up machine only checks (a second start builds nothing)', async () => {
    // `npm test` started Docker (with gVisor) and built the image: start.sh finds both and goes straight on.
    const dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-start-'));
    const port = await freePort();
    const t0 = Date.now();
    const child = spawn('bash', [path.join(ROOT, 'scripts/start.sh')], {
      cwd: ROOT,
      env: {
        ...process.env,
        PORT: String(port),
        SWITCHYARD_DATA_DIR: dataDir,
        SWITCHYARD_LOG_FORMAT: 'json',
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    try {
      const deadline = Date.now() + 30_000;
      while (!stdout.includes('"msg":"listening"') && Date.now() < deadline && child.exitCode === null) {
        await new Promise((r) => setTimeout(r, 50));
      }
      expect(stdout).toContain('"msg":"listening"');
      // Checking Docker, runsc and the image takes about a second; a rebuild would take a minute.
      expect(Date.now() - t0).toBeLessThan(15_000);
      expect(stderr).toMatch(/\[docker-engine\] engine answers \(runtimes: runc, runsc\)/);
      expect(stderr).toMatch(/\[sandbox-image\] up to date: switchyard\/sandbox:/);
      expect(stderr).not.toMatch(/building|debootstrap|installing/);
      const health = (await (await fetch(`http://127.0.0.1:${port}/health`)).json()) as {
        tiers: Record<string, { available: boolean; details?: { runtime?: string } }>;
      };
      for (const tier of ['subprocess', 'pooled', 'container', 'browser']) {
        expect({ tier, available: health.tiers[tier]?.available }).toEqual({ tier, available: true });
      }
      expect(health.tiers.container.details?.runtime).toBe('runsc');
    } finally {
      // start.sh execs the engine: the child is the engine itself.
      child.kill('SIGTERM');
      await new Promise((r) => (child.exitCode !== null ? r(undefined) : child.once('exit', r)));
      removeDataDir(dataDir);
    }
  }, 60_000);
});
