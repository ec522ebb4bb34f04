/**
 * The engine's OpenAPI document, checked by tools nobody here wrote, against the built engine as a real process:
 *   - openapi-spec-validator: the document is valid OpenAPI 3.0;
 *   - `redocly lint` (its recommended rules, as redocly.yaml says): no errors and no warnings;
 *   - Schemathesis, every check (`--checks all`: status codes, content types, response schemas, headers,
 *     positive/negative data, auth, undeclared methods, …) over all of its phases, the stateful one included
 *     (it follows the document's links from POST /v1/sessions, and the links it infers), within a fixed budget.
 * Any error or failure fails the test, and its message lists them with the tool's own output.
 *
 * The tools are installed by scripts/contract-tools.sh (npm test runs it): openapi-spec-validator and Schemathesis in
 * a venv under .runtime/contract-venv, Redocly's CLI as a devDependency. Without them this test fails saying so.
 *
 * Nothing leaves this machine: the engine listens on 127.0.0.1, Schemathesis runs under
 * test/support/loopback-only.py (its sockets may reach loopback addresses only, and it resolves no other name),
 * Redocly's telemetry and update check are off, and the engine itself is given no way out either (no egress
 * allowed for sessions, the browser tier disabled since a page may browse any public host). Docker is pointed at a
 * socket that does not exist, so the container tiers answer unavailable on every machine alike, as they do where
 * Docker is absent.
 *
 * The engine has an API key (Schemathesis sends it, and checks that requests without it are refused). Before the
 * run, a session is given a failed action, checkpoints, a plan waiting for a replan, two kernels and two Jupyter
 * kernels, and Schemathesis draws most of its path parameters from their ids, so that operations on them are tested
 * past 404; the DELETE operations get objects of their own. Sessions it creates itself come from POST /v1/sessions, followed by links.
 *
 * SWITCHYARD_CONTRACT_SEED=<n> replays another Schemathesis seed; SWITCHYARD_CONTRACT_OUTPUT_DIR=<dir> keeps the
 * document, the tools' outputs and Schemathesis' reports there.
 */
import { type SpawnOptions, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { removeDataDir } from '../support/data-dir';
import { EngineProcess, freePort } from '../support/engine-process';
import { SKILL_SCHEMA_KINDS } from '../support/skill-schema-kinds';
import { venvBin } from '../support/runtime-dir';

const REPO = path.join(__dirname, '..', '..');
const VENV_BIN = venvBin('contract-venv');
const PYTHON = path.join(VENV_BIN, 'python');
const REDOCLY = path.join(REPO, 'node_modules', '.bin', 'redocly');
/** The lint rules: Redocly's recommended ones, and those switched off with their reasons. */
const REDOCLY_CONFIG = path.join(REPO, 'redocly.yaml');
const LOOPBACK_ONLY = path.join(REPO, 'test', 'support', 'loopback-only.py');
/** Keeps Schemathesis to requests the document means where OpenAPI 3.0 cannot say it (read the module's docstring). */
const HOOKS_MODULE = 'schemathesis_hooks';

/**
 * By default the run is deterministic (`--generation-deterministic`, a fixed seed, `--max-examples` per operation):
 * CI sends the requests a developer's run sent, so its verdict does not depend on the machine's speed. A time
 * budget instead (`SWITCHYARD_CONTRACT_MAX_TIME_S`) explores: fuzzing and stateful testing repeat until it is spent.
 */
const EXPLORE_S = process.env.SWITCHYARD_CONTRACT_MAX_TIME_S;
const SCHEMATHESIS_MAX_TIME_S = EXPLORE_S === undefined ? 180 : Number(EXPLORE_S);
/** Test cases per operation and phase (the time budget ends the run first when the engine is slow). */
const SCHEMATHESIS_MAX_EXAMPLES = 20;
/** Killed past this, whatever it is doing: the budget (or the deterministic run's) plus start-up and shrinking. */
const killMs = (maxTimeS: number | undefined): number =>
  (maxTimeS ?? SCHEMATHESIS_MAX_TIME_S) * 1000 + 50_000;
/**
 * The second run explores with a random seed for this long (SWITCHYARD_CONTRACT_RANDOM_S, default 90 s), on as many
 * examples per operation as the time allows; SWITCHYARD_CONTRACT_RANDOM_SEED replays one.
 */
const RANDOM_S = Number(process.env.SWITCHYARD_CONTRACT_RANDOM_S ?? 90);
const RANDOM_SEED = Number(process.env.SWITCHYARD_CONTRACT_RANDOM_SEED ?? randomBytes(4).readUInt32BE(0));
const SCHEMATHESIS_EXPLORE_EXAMPLES = 1000;
const SEED = Number(process.env.SWITCHYARD_CONTRACT_SEED ?? 16_042_026);
/** Longest action the fuzzed requests may run (they may ask for more and get 400). */
const MAX_TIMEOUT_MS = 5000;

/** A tool's run: how it ended and what it printed. */
interface ToolRun {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

/** Runs `command`, killing it after `timeoutMs`. Never rejects for the tool's own failure. */
function run(
  command: string,
  args: string[],
  options: SpawnOptions & { timeoutMs: number },
): Promise<ToolRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { ...options, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => {
      stderr += `\n[contract test] killed after ${options.timeoutMs} ms\n`;
      child.kill('SIGKILL');
    }, options.timeoutMs);
    child.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr });
    });
  });
}

/** The environment of the outside tools: no proxy (everything they reach is on loopback), no colours. */
function toolEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env, NO_COLOR: '1', ...extra };
  for (const name of Object.keys(env)) if (/^(https?|all|no)_proxy$/i.test(name)) delete env[name];
  return env;
}

/** At most `max` characters of `text`, its end kept (where tools print their summaries). */
const tail = (text: string, max = 60_000): string =>
  text.length <= max ? text : `[… ${text.length - max} characters cut …]\n${text.slice(-max)}`;

const printed = (r: ToolRun): string =>
  [
    `exit: ${r.signal ?? r.code}`,
    r.stdout && `--- stdout ---\n${tail(r.stdout)}`,
    r.stderr && `--- stderr ---\n${tail(r.stderr)}`,
  ]
    .filter(Boolean)
    .join('\n');

function missingTools(): string[] {
  const needed = [
    [PYTHON, 'the venv'],
    [path.join(VENV_BIN, 'schemathesis'), 'schemathesis'],
    [path.join(VENV_BIN, 'openapi-spec-validator'), 'openapi-spec-validator'],
    [REDOCLY, '@redocly/cli'],
  ];
  return needed.filter(([file]) => !existsSync(file)).map(([file, what]) => `${what} (${file})`);
}

/** What Redocly's `--format json` prints. */
interface RedoclyReport {
  totals: { errors: number; warnings: number; ignored: number };
  problems: Array<{
    ruleId: string;
    severity: 'error' | 'warn';
    message: string;
    location: Array<{ pointer?: string }>;
  }>;
}

/** The parts of Schemathesis' JSON report (`--report json`) read here. */
interface SchemathesisReport {
  seed: number;
  exit_code: number;
  stop_reason: string;
  operations: { total: number; selected: number; tested: number; errored: number };
  phases: Record<string, { status: string; skip_reason: string | null }>;
  test_cases: { generated: number; with_failures: number; unique_failures: number; errored: number };
  failures: Array<{ code: string; title: string; count: number; operations: string[] }>;
  errors: Array<{ title: string; count: number }>;
  warnings: Record<string, string[]>;
}

/** Objects made before Schemathesis runs, whose ids it is given so that it reaches past 404. */
interface Fixtures {
  /** Holds the others; never deleted by the run. */
  session: string;
  action: string;
  /** A session whose policy asks before file writes, and its action awaiting approval. */
  approvalSession: string;
  awaiting: string;
  checkpoint: string;
  plan: string;
  kernel: string;
  /** A Jupyter kernel (a handle onto the session's node kernel, which no other fixture uses). */
  jupyterKernel: string;
  /** An open terminal of the session. */
  terminal: string;
  /** What the DELETE operations get, so that they do not take the objects above away. */
  doomedSessions: string[];
  doomedCheckpoints: string[];
  doomedKernel: string;
  doomedJupyterKernel: string;
  doomedTerminal: string;
}

describe('the OpenAPI document, checked by outside tools against the running engine', () => {
  const apiKey = randomBytes(24).toString('hex');
  let workDir: string;
  let dataDir: string;
  let engine: EngineProcess | undefined;
  let docFile: string;

  /** Keeps a tool's output: in the run's directory, and in SWITCHYARD_CONTRACT_OUTPUT_DIR when set. */
  const keep = (name: string, content: string): string => {
    const file = path.join(workDir, name);
    writeFileSync(file, content);
    const outDir = process.env.SWITCHYARD_CONTRACT_OUTPUT_DIR;
    if (outDir) {
      mkdirSync(outDir, { recursive: true });
      writeFileSync(path.join(outDir, name), content);
    }
    return file;
  };

  const requireTools = (): void => {
    const missing = missingTools();
    if (missing.length > 0) {
      throw new Error(
        `The contract tools are not installed: ${missing.join(', ')}.\n` +
          'Run `bash scripts/contract-tools.sh` (npm test does), after `npm ci`.',
      );
    }
  };

  const api = async <T = any>(method: string, urlPath: string, body?: unknown): Promise<T> => {
    const res = await fetch(`${engine!.baseUrl}${urlPath}`, {
      method,
      headers: {
        authorization: `Bearer ${apiKey}`,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    if (!res.ok) throw new Error(`${method} ${urlPath} answered ${res.status}: ${text}`);
    return (text ? JSON.parse(text) : undefined) as T;
  };

  /** A session with a failed action, a checkpoint, a plan waiting for a replan and a kernel; and what may go. */
  const makeFixtures = async (): Promise<Fixtures> => {
    const session = async (): Promise<string> => (await api<{ id: string }>('POST', '/v1/sessions', {})).id;
    const sid = await session();
    const s = `/v1/sessions/${sid}`;
    const failed = await api<{ id: string; status: string }>('POST', `${s}/actions`, {
      type: 'code',
      language: 'bash',
      code: 'echo out; echo err >&2; exit 3',
    });
    expect(failed.status).toBe('failed');
    const kernel = async (language: string): Promise<string> =>
      (
        await api<{ output: { kernel: { id: string } } }>('POST', `${s}/actions`, {
          type: 'code',
          language,
          code: 'x=1',
          state: 'session',
        })
      ).output.kernel.id;
    const jupyterKernel = async (): Promise<string> =>
      (await api<{ id: string }>('POST', `${s}/jupyter/api/kernels`, { name: 'javascript' })).id;
    const terminal = async (): Promise<string> =>
      (await api<{ id: string }>('POST', `${s}/terminals`, { cols: 80, rows: 24 })).id;
    const checkpoint = async (label: string): Promise<string> =>
      (await api<{ id: string }>('POST', `${s}/checkpoints`, { label })).id;
    const plan = await api<{ id: string; status: string }>('POST', `${s}/plans`, {
      wait: true,
      steps: [{ id: 'fails', action: { type: 'code', language: 'bash', code: 'exit 1' } }],
    });
    expect(plan.status).toBe('needs_replan');
    // Tenant skills of three kinds of input schema, so the tool lists (strict ones too) and skill calls are fuzzed
    // with them: a discriminated oneOf, a free-form object, nested closed objects.
    for (const skill of SKILL_SCHEMA_KINDS) await api('POST', '/v1/skills', skill);
    // A session whose policy asks before any file write: an action of it waits for approval, so the approval
    // operations are tested past 404.
    const asking = await api<{ id: string }>('POST', '/v1/sessions', {
      policy: { rules: [{ effect: 'ask', match: { type: 'file' }, reason: 'contract fixture' }] },
    });
    const waiting = await api<{ id: string; status: string }>('POST', `/v1/sessions/${asking.id}/actions`, {
      type: 'file',
      op: 'write',
      path: 'held.txt',
      content: 'held',
    });
    expect(waiting.status).toBe('awaiting_approval');
    return {
      session: sid,
      doomedSessions: await Promise.all([1, 2, 3, 4, 5].map(() => session())),
      action: failed.id,
      approvalSession: asking.id,
      awaiting: waiting.id,
      checkpoint: await checkpoint('contract'),
      doomedCheckpoints: [
        await checkpoint('doomed-1'),
        await checkpoint('doomed-2'),
        await checkpoint('doomed-3'),
      ],
      plan: plan.id,
      kernel: await kernel('python'),
      doomedKernel: await kernel('bash'),
      jupyterKernel: await jupyterKernel(),
      doomedJupyterKernel: await jupyterKernel(),
      terminal: await terminal(),
      doomedTerminal: await terminal(),
    };
  };

  beforeAll(async () => {
    workDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-contract-'));
    dataDir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-contract-data-'));
    requireTools();
    engine = await EngineProcess.start(dataDir, await freePort(), {
      // An admin's key: it may also set tenants' policies and decide approvals, so those operations are exercised too.
      SWITCHYARD_ADMIN_KEYS: apiKey,
      SWITCHYARD_POOL_MIN: '0',
      DOCKER_HOST: 'unix:///nonexistent/switchyard-contract/docker.sock',
      SWITCHYARD_BROWSER_ENABLED: 'false',
      SWITCHYARD_EGRESS_ALLOWED: '',
      SWITCHYARD_EGRESS_DEFAULT: '',
      SWITCHYARD_EGRESS_RESOLVE: '',
      SWITCHYARD_MAX_TIMEOUT_MS: String(MAX_TIMEOUT_MS),
      SWITCHYARD_DEFAULT_TIMEOUT_MS: '2000',
      SWITCHYARD_BROWSER_TIMEOUT_MS: String(MAX_TIMEOUT_MS),
      // Hundreds of sessions come and go: plain directories, not a loop-mounted image each.
      SWITCHYARD_WORKSPACE_QUOTA: 'off',
      SWITCHYARD_MAX_SESSIONS: '100000',
    });

    const res = await fetch(`${engine.baseUrl}/docs-json`);
    expect(res.status).toBe(200);
    // Indented, so that the tools' line numbers point somewhere readable.
    docFile = keep('openapi.json', `${JSON.stringify(await res.json(), null, 2)}\n`);
  }, 60_000);

  afterAll(async () => {
    await engine?.stop('SIGTERM');
    if (dataDir) removeDataDir(dataDir);
    if (workDir) rmSync(workDir, { recursive: true, force: true });
  });

  it('is valid OpenAPI 3.0 for openapi-spec-validator', async () => {
    requireTools();
    const r = await run(PYTHON, [LOOPBACK_ONLY, 'openapi-spec-validator', docFile], {
      cwd: workDir,
      env: toolEnv(),
      timeoutMs: 60_000,
    });
    keep('openapi-spec-validator.txt', printed(r));
    if (r.code !== 0 || !/: OK\s*$/.test(r.stdout)) {
      throw new Error(`openapi-spec-validator found errors in the document:\n${printed(r)}`);
    }
  });

  it('is clean for `redocly lint`, warnings included (recommended rules, redocly.yaml)', async () => {
    requireTools();
    const r = await run(REDOCLY, ['lint', docFile, '--format', 'json', '--config', REDOCLY_CONFIG], {
      cwd: workDir,
      env: toolEnv({ REDOCLY_TELEMETRY: 'off', REDOCLY_SUPPRESS_UPDATE_NOTICE: 'true' }),
      timeoutMs: 60_000,
    });
    keep('redocly-lint.json', r.stdout);
    keep('redocly-lint.txt', printed(r));
    let report: RedoclyReport;
    try {
      report = JSON.parse(r.stdout) as RedoclyReport;
    } catch {
      throw new Error(`redocly lint printed no JSON report:\n${printed(r)}`);
    }
    const line = (p: RedoclyReport['problems'][number]): string =>
      `${p.severity} ${p.ruleId} at ${p.location.map((l) => l.pointer).join(', ')}: ${p.message}`;
    if (r.code !== 0 || report.totals.errors + report.totals.warnings > 0 || report.problems.length > 0) {
      throw new Error(
        `redocly lint found ${report.totals.errors} error(s) and ${report.totals.warnings} warning(s):\n` +
          `${report.problems.map(line).join('\n')}\n\n${printed(r)}`,
      );
    }
  });

  it('declares a 4XX answer for every operation but the health probes (redocly.yaml switches that rule off)', () => {
    const doc = JSON.parse(readFileSync(docFile, 'utf8')) as {
      paths: Record<string, Record<string, { responses?: Record<string, unknown> }>>;
    };
    const probes = new Set(['/health', '/health/live', '/health/ready']);
    const without = Object.entries(doc.paths).flatMap(([p, ops]) =>
      Object.entries(ops)
        .filter(([, op]) => !Object.keys(op.responses ?? {}).some((code) => /^4(\d\d|XX)$/.test(code)))
        .map(([method]) => `${method.toUpperCase()} ${p}`),
    );
    expect(without.filter((op) => !probes.has(op.split(' ')[1]))).toEqual([]);
    expect(without.length).toBeGreaterThan(0);
  });

  /**
   * One Schemathesis run over the fixtures, every check and phase: deterministic (a fixed seed, `--max-examples` per
   * operation) when `maxTimeS` is undefined, else exploring with `seed` until `maxTimeS` is spent. Its reports are
   * kept under `name`.
   */
  const schemathesis = async (
    fixtures: Fixtures,
    { name, seed, maxTimeS }: { name: string; seed: number; maxTimeS?: number },
  ): Promise<void> => {
    const { port } = new URL(engine!.baseUrl);
    const list = (ids: string[]): string => `[${ids.map((id) => JSON.stringify(id)).join(', ')}]`;
    const bind = (dictionary: string, probability = 0.9): string =>
      `{ dictionary = "${dictionary}", probability = ${probability} }`;
    const nested = [
      `"path.sessionId" = ${bind('fixture-session')}`,
      `"path.actionId" = ${bind('actions')}`,
      `"path.checkpointId" = ${bind('checkpoints')}`,
      `"path.planId" = ${bind('plans')}`,
      `"path.kernelId" = ${bind('kernels')}`,
    ];
    const config = [
      '# Written by test/e2e/contract.e2e-spec.ts for one run.',
      `base-url = "http://127.0.0.1:${port}"`,
      // An action may run MAX_TIMEOUT_MS; a plan several of them.
      'request-timeout = 30',
      // The key comes from the environment, so that the kept config holds none.
      '[auth.openapi.bearer]',
      'bearer = "${SWITCHYARD_CONTRACT_API_KEY}"',
      // No example database or cache left behind.
      '[generation]',
      'database = "none"',
      '[cache]',
      'enabled = false',
      // An answer may take as long as the work it waits for (a sync action, a plan with `wait`, kept short by the
      // hooks): up to the request timeout, not the check's default 10 s.
      '[checks]',
      'max_response_time = 30',
      // Objects made before the run: an operation on one of them is tested past its 404.
      '[dictionaries]',
      `fixture-session = { values = ${list([fixtures.session, fixtures.approvalSession])} }`,
      `doomed-sessions = { values = ${list(fixtures.doomedSessions)} }`,
      `actions = { values = ${list([fixtures.action, fixtures.awaiting])} }`,
      `checkpoints = { values = ${list([fixtures.checkpoint])} }`,
      `doomed-checkpoints = { values = ${list(fixtures.doomedCheckpoints)} }`,
      `plans = { values = ${list([fixtures.plan])} }`,
      `kernels = { values = ${list([fixtures.kernel])} }`,
      `doomed-kernels = { values = ${list([fixtures.doomedKernel])} }`,
      `jupyter-kernels = { values = ${list([fixtures.jupyterKernel])} }`,
      `doomed-jupyter-kernels = { values = ${list([fixtures.doomedJupyterKernel])} }`,
      `terminals = { values = ${list([fixtures.terminal])} }`,
      `doomed-terminals = { values = ${list([fixtures.doomedTerminal])} }`,
      // The first entry an operation matches applies. Deletions get objects of their own, always (else
      // Schemathesis also deletes the ones it saw in answers, the fixtures included).
      '[[operations]]',
      'include-operation-id = "SessionsController_remove"',
      `parameters = { "path.sessionId" = ${bind('doomed-sessions', 1)} }`,
      '[[operations]]',
      'include-operation-id = "CheckpointsController_remove"',
      `parameters = { ${nested[0]}, "path.checkpointId" = ${bind('doomed-checkpoints', 1)} }`,
      '[[operations]]',
      'include-operation-id = "KernelsController_remove"',
      `parameters = { ${nested[0]}, "path.kernelId" = ${bind('doomed-kernels', 1)} }`,
      '[[operations]]',
      'include-operation-id = "JupyterController_remove"',
      `parameters = { ${nested[0]}, "path.kernelId" = ${bind('doomed-jupyter-kernels', 1)} }`,
      // Jupyter kernel ids are UUIDs of their own, not the session kernels' (before the rule below, which matches too).
      '[[operations]]',
      'include-operation-id = "TerminalsController_close"',
      `parameters = { ${nested[0]}, "path.terminalId" = ${bind('doomed-terminals', 1)} }`,
      '[[operations]]',
      `include-path-regex = '/terminals/\\{terminalId\\}'`,
      `parameters = { ${nested[0]}, "path.terminalId" = ${bind('terminals')} }`,
      // Opening a terminal answers 503 by design when the tier the session's state lives in cannot hold it: here
      // Docker is down on purpose, and a template session's subprocess box cannot have its image's root. A `cwd`
      // that is no directory of the session's workspace is a 400 naming `cwd` (INVALID_CWD, documented): the schema
      // cannot know which directories the workspace has.
      '[[operations]]',
      'include-operation-id = "TerminalsController_open"',
      'checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]',
      'checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "400", "401", "403", "404", "409", "429", "5xx"]',
      '[[operations]]',
      `include-path-regex = '/jupyter/api/kernels/\\{kernelId\\}'`,
      `parameters = { ${nested[0]}, "path.kernelId" = ${bind('jupyter-kernels')} }`,
      // A readiness probe answers 503 by design while a tier is down (here the container and browser tiers
      // are, on purpose): that answer is still checked against the document, but is not a server error. Any
      // other 5xx from it still is.
      '[[operations]]',
      'include-operation-id = "ReadinessController_ready"',
      'checks.not_a_server_error.expected-statuses = ["2xx", "3xx", "4xx", "503"]',
      // A file download with a `Range` starting past the file's end answers 416 by design (documented): a request
      // the schema cannot tell from a valid one, since the file's size is not in it.
      '[[operations]]',
      'include-operation-id = "FilesController_download"',
      'checks.positive_data_acceptance.expected-statuses = ["2xx", "3xx", "401", "403", "404", "409", "416", "429", "5xx"]',
      // The event stream stays open while the session lives: read it for 2 s.
      '[[operations]]',
      'include-operation-id = "EventsController_stream"',
      'request-timeout = 2',
      '[[operations]]',
      `include-path-regex = '\\{(actionId|checkpointId|planId|kernelId)\\}'`,
      `parameters = { ${nested.join(', ')} }`,
      '',
    ].join('\n');
    const configFile = keep(`${name}.toml`, config);
    const reportFile = path.join(workDir, `${name}-report.json`);
    const junitFile = path.join(workDir, `${name}-junit.xml`);

    const started = Date.now();
    const r = await run(
      PYTHON,
      [
        LOOPBACK_ONLY,
        'schemathesis',
        '--config-file',
        configFile,
        'run',
        docFile,
        '--checks',
        'all',
        '--phases',
        'examples,coverage,fuzzing,stateful',
        '--mode',
        'all',
        '--max-examples',
        String(maxTimeS === undefined ? SCHEMATHESIS_MAX_EXAMPLES : SCHEMATHESIS_EXPLORE_EXAMPLES),
        ...(maxTimeS === undefined ? ['--generation-deterministic'] : ['--max-time', String(maxTimeS)]),
        '--workers',
        '2',
        '--seed',
        String(seed),
        '--no-color',
        '--report',
        'json,junit',
        '--report-dir',
        workDir,
        '--report-json-path',
        reportFile,
        '--report-junit-path',
        junitFile,
      ],
      {
        cwd: workDir,
        env: toolEnv({
          SWITCHYARD_CONTRACT_API_KEY: apiKey,
          SCHEMATHESIS_HOOKS: HOOKS_MODULE,
          PYTHONPATH: path.join(REPO, 'test', 'support'),
        }),
        timeoutMs: killMs(maxTimeS),
      },
    );
    const seconds = Math.round((Date.now() - started) / 1000);
    keep(`${name}.txt`, printed(r));
    if (existsSync(junitFile)) keep(`${name}-junit.xml`, readFileSync(junitFile, 'utf8'));
    if (r.signal === 'SIGKILL') {
      // Its report is cut short then (or empty): say what happened, not that the JSON is malformed.
      throw new Error(`Schemathesis did not finish within ${seconds} s and was killed:\n${printed(r)}`);
    }
    if (!existsSync(reportFile)) {
      throw new Error(`Schemathesis wrote no report (after ${seconds} s):\n${printed(r)}`);
    }
    const reportText = readFileSync(reportFile, 'utf8');
    keep(`${name}-report.json`, reportText);
    const report = JSON.parse(reportText) as SchemathesisReport;

    const problems = [
      ...report.failures.map(
        (f) => `${f.code} ${f.title} (${f.count}): ${f.operations.join(', ') || 'stateful sequence'}`,
      ),
      ...report.errors.map((e) => `error: ${e.title} (${e.count})`),
      ...(report.phases.stateful?.status === 'skip'
        ? [`the stateful phase did not run (${report.phases.stateful.skip_reason ?? 'no reason given'})`]
        : []),
      ...(r.code === 0 ? [] : [`exit ${r.signal ?? r.code}`]),
    ];
    if (problems.length > 0) {
      throw new Error(
        `Schemathesis (seed ${report.seed}: ${maxTimeS === undefined ? 'SWITCHYARD_CONTRACT_SEED' : 'SWITCHYARD_CONTRACT_RANDOM_SEED'}` +
          `=${report.seed} replays it; ${seconds} s, ` +
          `${report.test_cases.generated} test cases) found:\n` +
          `${problems.map((p) => `  - ${p}`).join('\n')}\n\nIts output:\n${printed(r)}\n\n` +
          `The engine's stderr (its end):\n${engine!.log}`,
      );
    }
    expect(report.operations.tested).toBe(report.operations.total);
  };

  let fixtures: Fixtures | undefined;

  it(
    'passes every Schemathesis check, the stateful phase included',
    async () => {
      requireTools();
      fixtures ??= await makeFixtures();
      await schemathesis(fixtures, {
        name: 'schemathesis',
        seed: SEED,
        ...(EXPLORE_S !== undefined && { maxTimeS: SCHEMATHESIS_MAX_TIME_S }),
      });
    },
    killMs(EXPLORE_S === undefined ? undefined : SCHEMATHESIS_MAX_TIME_S) + 60_000,
  );

  it(
    `passes them with a random seed too, for ${RANDOM_S} s (the seed is printed, to replay a failure)`,
    async () => {
      requireTools();
      fixtures ??= await makeFixtures();
      console.log(
        `contract: Schemathesis random-seed run, seed ${RANDOM_SEED} (SWITCHYARD_CONTRACT_RANDOM_SEED)`,
      );
      await schemathesis(fixtures, { name: 'schemathesis-random', seed: RANDOM_SEED, maxTimeS: RANDOM_S });
    },
    killMs(RANDOM_S) + 60_000,
  );
});
