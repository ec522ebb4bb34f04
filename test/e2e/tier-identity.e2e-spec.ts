import * as fs from 'node:fs';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';

jest.setTimeout(120_000);

/**
 * One environment, three strengths (issue 29): the subprocess tier runs the sandbox image's root, not the engine
 * host's /usr, so the same probe answers the same in every tier of one session, and nothing of the host's system is
 * visible to code in the subprocess tier. Docker backend: on Kubernetes a session's code never runs in the
 * subprocess tier (its floor is `pooled`).
 */
describe('one environment in every tier', () => {
  let engine: EngineHarness;
  let sid: string;
  /** The image's exported root, as /health names it. */
  let rootDir: string;
  /** An entry of `dir` (a system directory) that exists in one filesystem and not in the other. */
  const onlyIn = (from: string, notIn: string, dir: string): string => {
    const name = fs.readdirSync(path.join(from, dir)).find((n) => !fs.existsSync(path.join(notIn, dir, n)));
    if (name === undefined) throw new Error(`every entry of ${from}${dir} is in ${notIn}${dir} too`);
    return path.join(dir, name);
  };

  /**
   * Versions, where python lives, and the image's own content: the interpreters' and the package list's hashes
   * (the host's python and node are other builds, its package list another).
   */
  const PROBE = [
    'python3 --version',
    'node --version',
    'python3 -c "import sys; print(sys.prefix)"',
    'readlink -f "$(command -v python3)"',
    'sha256sum "$(readlink -f "$(command -v python3)")" "$(readlink -f "$(command -v node)")" /etc/os-release',
    "dpkg-query -W -f '${Package} ${Version}\\n' | sha256sum",
    'pip --version',
    'npm --version',
    'id; whoami',
  ].join('; ');

  const run = (tier: string, code: string, language = 'bash'): Promise<any> =>
    engine.action(sid, { type: 'code', language, code, tier, timeoutMs: 30_000 });

  beforeAll(async () => {
    engine = await EngineHarness.start({});
    sid = await engine.createSession();
  });
  afterAll(async () => {
    await engine?.stop();
  });

  it('runs the subprocess tier on the image root, as /health says', async () => {
    // Its first sandbox exports the root (once per image id); /health shows the system in force.
    const first = await run('subprocess', 'true');
    expect(first).toMatchObject({ status: 'succeeded', tier: 'subprocess' });
    const health = (await engine.request('GET', '/health')).body;
    const system = health.tiers.subprocess.details.system;
    const runtime = path.resolve(__dirname, '../../.runtime');
    const tag = fs.readFileSync(path.join(runtime, 'sandbox-image.tag'), 'utf8').trim();
    expect(system).toMatchObject({ root: 'image', image: tag });
    expect(system.imageId).toMatch(/^sha256:[0-9a-f]{64}$/);
    rootDir = path.join(runtime, 'rootfs', system.imageId.slice('sha256:'.length));
    expect(fs.existsSync(path.join(rootDir, 'usr/bin'))).toBe(true);
  });

  it('answers the same probe identically in the subprocess, pooled and one-off tiers', async () => {
    // A file of the image's that the host does not have: every tier sees it.
    const imageOnly = onlyIn(rootDir, '/', '/usr/share/doc');
    const answers: Record<string, string> = {};
    for (const tier of ['subprocess', 'pooled', 'container']) {
      const r = await run(tier, `${PROBE}; test -e '${imageOnly}' && echo has '${imageOnly}'`);
      expect(r).toMatchObject({ status: 'succeeded', tier, exitCode: 0 });
      answers[tier] = r.stdout;
    }
    expect(answers.subprocess).toMatch(/^Python 3\.\d+\.\d+\nv\d+\.\d+\.\d+\n\/usr\n/);
    expect(answers.subprocess).toContain(`has ${imageOnly}\n`);
    expect(answers.pooled).toBe(answers.subprocess);
    expect(answers.container).toBe(answers.subprocess);
  });

  it('runs a kernel in the subprocess tier on the image’s python too', async () => {
    const code = 'import sys, os; print(sys.version); print(os.path.realpath(sys.executable))';
    const cells: string[] = [];
    // A session of its own: the session's kernels draw its later actions into their tier (pooled, here).
    const own = await engine.createSession();
    for (const tier of ['subprocess', 'pooled']) {
      const r = await engine.action(own, {
        type: 'code',
        language: 'python',
        code,
        tier,
        state: 'session',
        timeoutMs: 30_000,
      });
      expect(r).toMatchObject({ status: 'succeeded', tier });
      cells.push(r.stdout);
    }
    expect(cells[1]).toBe(cells[0]);
  });

  it('shows nothing of the host’s /usr in the subprocess tier', async () => {
    // A command of the host's that the image lacks (bubblewrap itself, for one).
    const hostOnly = onlyIn('/', rootDir, '/usr/bin');
    const r = await run(
      'subprocess',
      `test -e '${hostOnly}' && echo visible || echo hidden; node --version; test -w /usr && echo writable || echo read-only`,
    );
    expect(r).toMatchObject({ status: 'succeeded', tier: 'subprocess' });
    const [visibility, node, writable] = r.stdout.trim().split('\n');
    expect(visibility).toBe('hidden');
    const pooled = await run('pooled', 'node --version');
    expect(`${node}\n`).toBe(pooled.stdout);
    expect(writable).toBe('read-only');
  });
});
