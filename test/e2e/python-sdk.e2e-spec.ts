import { execFile } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { promisify } from 'node:util';
import { EngineHarness } from '../support/engine-harness';
import { RUNTIME_DIR } from '../support/runtime-dir';

/**
 * The Python SDK as a user gets it: the wheel scripts/python-sdk.sh builds, installed with its adapters' extras
 * into a FRESH venv from the wheelhouse only (`pip install --no-index --find-links`: no PyPI), then a Python program
 * (packages/python/e2e/drive_engine.py) drives a real engine with it: the issue's data-science example (a real PNG),
 * files of several MiB and directories both ways, commands in the foreground and background (output through the
 * session's event stream), checkpoint/restore/fork, typed errors, the events iterator, the OpenAI Agents SDK and
 * LangChain adapters with the real packages (no model calls), and the async client.
 */
const run = promisify(execFile);
const REPO = path.join(__dirname, '..', '..');
const WHEELHOUSE = path.join(RUNTIME_DIR, 'python-sdk', 'wheelhouse');
const PROGRAM = path.join(REPO, 'packages', 'python', 'e2e', 'drive_engine.py');
const PYTHON = process.env.SWITCHYARD_CLIENT_PYTHON ?? 'python3';
const PIP = path.join(RUNTIME_DIR, 'python-sdk-venv', 'bin', 'pip');

type Report = Record<string, any>;

describe('the Python SDK, installed from its wheel into a fresh venv', () => {
  let engine: EngineHarness;
  let venv: string;
  let report: Report;

  beforeAll(async () => {
    const wheel =
      existsSync(WHEELHOUSE) && readdirSync(WHEELHOUSE).find((f) => /^switchyard-.*\.whl$/.test(f));
    if (!wheel || !existsSync(PIP)) {
      throw new Error(`no switchyard wheel in ${WHEELHOUSE}: run bash scripts/python-sdk.sh first`);
    }
    venv = mkdtempSync(path.join(os.tmpdir(), 'switchyard-python-sdk-'));
    const [started] = await Promise.all([
      EngineHarness.start({ SWITCHYARD_POOL_MIN: '1' }),
      (async () => {
        // Without its own pip (ensurepip takes longer than the install): the pinned pip of the SDK's test venv
        // installs into it (`--python`), from the wheelhouse only.
        await run(PYTHON, ['-m', 'venv', '--without-pip', venv]);
        await run(PIP, [
          '--python',
          path.join(venv, 'bin', 'python'),
          'install',
          '--quiet',
          '--no-compile',
          '--disable-pip-version-check',
          '--no-index',
          '--find-links',
          WHEELHOUSE,
          'switchyard[openai-agents,langchain]',
        ]);
      })(),
    ]);
    engine = started;
    // Run from a directory outside the checkout, so `import switchyard` can only find the installed wheel.
    const { stdout, stderr } = await run(path.join(venv, 'bin', 'python'), [PROGRAM], {
      cwd: venv,
      env: { ...process.env, SWITCHYARD_URL: engine.baseUrl, PYTHONPATH: '', SWITCHYARD_API_KEY: '' },
      maxBuffer: 16 * 1024 * 1024,
      timeout: 240_000,
    });
    report = JSON.parse(stdout) as Report;
    if (process.env.SWITCHYARD_TEST_VERBOSE) console.log(stderr);
  }, 300_000);

  afterAll(async () => {
    await engine?.stop();
    if (venv) rmSync(venv, { recursive: true, force: true });
  });

  it('imports the installed wheel, not the checkout', () => {
    expect(report.version).toBe('0.1.0');
    expect(report.module.startsWith(venv)).toBe(true);
  });

  it("runs the issue's example: the data-science template's chart is a real PNG at results[0]", () => {
    expect(report.example).toMatchObject({ template: 'data-science', status: 'succeeded', error: null });
    expect(report.example.pngMagic).toBe('89504e470d0a1a0a');
    expect(report.example.pngBytes).toBeGreaterThan(1000);
    expect(report.example.formats).toEqual(['image/png', 'text/plain']);
    expect(report.example.text).toBe('<Axes: >');
  });

  it('runs code in the session kernel (state kept) and fresh, with errors as results', () => {
    expect(report.code).toEqual({
      text: '42',
      stdout: 'side\n',
      kept: '41',
      error: ['ZeroDivisionError', 'division by zero'],
      node: '42\n',
    });
  });

  it('writes and reads a 5 MiB binary file streamed both ways, sha256 intact; typed errors for files', () => {
    expect(report.files).toEqual({
      size: true,
      sha256Answer: true,
      sha256Read: true,
      sha256Stream: true,
      text: 'héllo\n',
      listing: [['notes/hello.txt', 'file']],
      existsError: 'FILE_EXISTS',
      missing: 'FILE_NOT_FOUND',
      inSandbox: true,
    });
  });

  it('uploads a directory as a tar and downloads it back, tree and bytes the same', () => {
    expect(report.directories).toEqual({
      files: 3,
      inSandbox: ['proj/README.md', 'proj/pkg/mod.py', 'proj/pkg/sub/blob.bin'],
      sameTree: true,
      blobSame: true,
      extra: 'from the sandbox\n',
      single: 'VALUE = 1\n',
    });
  });

  it("runs commands in the foreground and background; on_stdout gets the server's output from the stream", () => {
    expect(report.commands).toEqual({
      foreground: [3, 'out\n', 'err\n'],
      cwd: true,
      callbacks: 'line 1\nline 2\nline 3\n',
      background: [0, 'line 1\nline 2\nline 3\n', 'done\n'],
      logs: 'line 1\nline 2\nline 3\n',
      running: ['sleeper'],
      killed: false,
    });
  });

  it('checkpoints, restores and forks', () => {
    expect(report.checkpoints).toEqual({
      killedAgain: false,
      label: 'before',
      restored: 'before',
      removed: 1,
      laterGone: true,
      inChild: 'before',
      parentUntouched: 'before',
      listed: ['before'],
    });
  });

  it('raises typed errors carrying the status, the code and the field', () => {
    expect(report.errors).toEqual({
      notFound: [404, 'NOT_FOUND'],
      invalid: [400, 'VALIDATION_FAILED', 'ttlSeconds'],
      action: [400, 'language'],
      connection: [0, 'CONNECTION_FAILED'],
    });
  });

  it('iterates the session events', () => {
    expect(report.events.types).toEqual(
      expect.arrayContaining(['action.started', 'action.output', 'action.completed', 'checkpoint.created']),
    );
    expect(report.events.output).toBe('evented\n');
  });

  it('gives the OpenAI Agents SDK FunctionTools and LangChain StructuredTools that run real calls', () => {
    expect(report.adapters.agentsTools).toBeGreaterThan(10);
    expect(report.adapters).toMatchObject({
      strict: true,
      agents: '[stdout]\nagents\n\n[exit_code]\n0',
      langchain: '[stdout]\nlangchain\n\n[exit_code]\n0',
      read: 'langchain\n',
    });
  });

  it('does the same through the async client', () => {
    expect(report.async).toEqual({
      text: '42',
      sha: true,
      callbacks: 'async\nend\n',
      exit: 0,
      events: true,
      missing: 'NOT_FOUND',
    });
  });
});
