import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { EngineHarness } from '../support/engine-harness';
import {
  documentationFiles,
  type ShellExample,
  shellExamples,
  strayMarkers,
} from '../support/markdown-examples';

// The shell examples of README.md and docs/*.md, run as a reader would paste them, against a real engine. The docs
// talk to http://127.0.0.1:8080 through $API and act on a session in $SID; here both point at the test's engine.
const ROOT = path.join(__dirname, '..', '..');
const DOCS_URL = 'http://127.0.0.1:8080';
const BLOCK_TIMEOUT_MS = 120_000;

const examples: ShellExample[] = documentationFiles(ROOT).flatMap((f) => shellExamples(ROOT, f));
const runnable = examples.filter((e) => e.notRun === undefined);

function runBash(
  script: string,
  env: Record<string, string>,
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn('bash', ['-euo', 'pipefail', '-c', script], {
      cwd: ROOT,
      env: { ...process.env, ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), BLOCK_TIMEOUT_MS - 5_000);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}

describe('documentation examples', () => {
  it('finds the examples, and every one is either run or marked with the reason it is not', () => {
    expect(runnable.length).toBeGreaterThan(10);
    const withoutReason = examples.filter((e) => e.notRun !== undefined && !e.notRun.trim());
    expect(withoutReason.map((e) => e.where)).toEqual([]);
    expect(documentationFiles(ROOT).flatMap((f) => strayMarkers(ROOT, f))).toEqual([]);
  });

  it("keeps CI's test command in the README (.ci/run runs exactly it)", () => {
    const readme = shellExamples(ROOT, 'README.md').map((e) => e.script.trim());
    expect(readme).toContain('npm ci && npm test');
  });

  describe('run against a real engine', () => {
    let engine: EngineHarness;

    beforeAll(async () => {
      // As docs/policies-and-skills.md starts it for its skill examples.
      engine = await EngineHarness.start({ SWITCHYARD_SKILLS_DIR: path.join(ROOT, 'examples', 'skills') });
    });
    afterAll(() => engine?.stop());

    it.each(runnable.map((e) => [e.where, e] as const))(
      '%s exits 0 and shows what its comments say',
      async (_where, example) => {
        const sid = await engine.createSession();
        const script = example.script.split(DOCS_URL).join(engine.baseUrl);
        const { code, stdout, stderr } = await runBash(script, {
          API: engine.baseUrl,
          SWITCHYARD_URL: engine.baseUrl,
          SID: sid,
        });
        expect({ code, stderr: stderr.slice(-2000) }).toEqual({ code: 0, stderr: expect.any(String) });
        for (const key of example.expected.keys) expect(stdout).toContain(`"${key}":`);
        for (const [key, value] of example.expected.strings) expect(stdout).toContain(`"${key}":"${value}"`);
      },
      BLOCK_TIMEOUT_MS,
    );
  });
});
