import { type ErrorKind, InvalidInputError, NO_RISK, type Tier } from '@switchyard/common';
import { RiskPolicy } from './risk/risk-policy';
import { PoolExhaustedError } from './core/pooled.errors';
import { BASE_ENV } from './core/env-policy';
import { SandboxError, SandboxInternalError } from './core/sandbox.errors';
import { resolveSandboxOptions, type SandboxModuleOptions } from './core/sandbox.options';
import { SandboxManager, toOutcome } from './sandbox-manager.service';
import { SandboxTier } from './core/sandbox-tier.port';
import { kernelsOf, prepareAndRun } from './sandbox-manager.testing';
import {
  isRunnable,
  type CodeRequest,
  type TierAvailability,
  type TierJob,
  type TierRunResult,
} from './core/sandbox.types';

/** Records what it was asked to do and answers with what the test configured. */
class FakeTier extends SandboxTier {
  readonly runs: TierJob[] = [];
  readonly released: string[] = [];
  availabilityAnswer: TierAvailability = { available: true };
  result: Partial<TierRunResult> = { exitCode: 0, stdout: 'ok\n' };
  runError?: Error;

  constructor(readonly name: Tier) {
    super();
  }

  async availability(): Promise<TierAvailability> {
    return this.availabilityAnswer;
  }

  async run(job: TierJob): Promise<TierRunResult> {
    this.runs.push(job);
    if (this.runError) throw this.runError;
    return {
      timedOut: false,
      stdout: '',
      stderr: '',
      truncated: { stdout: false, stderr: false },
      durationMs: 5,
      ...this.result,
    };
  }

  async releaseSession(sessionId: string): Promise<void> {
    this.released.push(sessionId);
  }
}

const LOW = 'print(1)';
const MEDIUM = 'import os\nprint(os.environ["HOME"])';
const HIGH = 'import socket, subprocess\nsocket.socket().connect(("x", 1))\nsubprocess.run(["id"])';
const CRITICAL = ':(){ :|:& };:';

function request(overrides: Partial<CodeRequest> = {}): CodeRequest {
  return {
    actionId: 'act-1',
    sessionId: 'ses-1',
    language: 'python',
    code: LOW,
    tier: 'auto',
    workspaceDir: '/srv/ws/ses-1',
    ...overrides,
  };
}

function setup(tiers: Tier[] = ['subprocess', 'pooled', 'container'], options: SandboxModuleOptions = {}) {
  const resolved = resolveSandboxOptions({
    maxCodeBytes: 1000,
    maxStdinBytes: 100,
    maxTimeoutMs: 60_000,
    ...options,
  });
  const fakes = Object.fromEntries(tiers.map((t) => [t, new FakeTier(t)])) as Record<Tier, FakeTier>;
  const manager = new SandboxManager(
    resolved,
    new RiskPolicy(resolved.risk),
    Object.values(fakes),
    kernelsOf(),
  );
  return { manager, fakes, resolved };
}

describe('SandboxManager.route', () => {
  const { manager } = setup();

  it.each([
    ['low', LOW, 'subprocess'],
    ['medium', MEDIUM, 'pooled'],
    ['high', HIGH, 'container'],
  ] as const)('sends %s risk to %s', (level, code, tier) => {
    const decision = manager.route(request({ code }));
    expect(decision.risk.level).toBe(level);
    expect(decision.tier).toBe(tier);
    expect(decision.denial).toBeUndefined();
  });

  it('denies critical risk with the reasons, for any requested tier', () => {
    for (const tier of ['auto', 'subprocess', 'container'] as const) {
      const decision = manager.route(request({ language: 'bash', code: CRITICAL, tier }));
      expect(decision.tier).toBeUndefined();
      expect(decision.denial).toMatchObject({ class: 'policy', code: 'RISK_CRITICAL' });
      expect(decision.denial!.message).toContain('fork-bomb');
    }
  });

  it('lets a caller pick a stronger tier', () => {
    expect(manager.route(request({ tier: 'container' })).tier).toBe('container');
    expect(manager.route(request({ tier: 'pooled' })).tier).toBe('pooled');
    expect(manager.route(request({ code: MEDIUM, tier: 'container' })).tier).toBe('container');
    expect(manager.route(request({ code: MEDIUM, tier: 'pooled' })).denial).toBeUndefined();
  });

  it('refuses a weaker tier, explaining which one the risk needs', () => {
    const decision = manager.route(request({ code: HIGH, tier: 'subprocess' }));
    expect(decision.tier).toBe('subprocess');
    expect(decision.denial).toMatchObject({ class: 'policy', code: 'TIER_TOO_WEAK' });
    expect(decision.denial!.message).toMatch(/"subprocess" is weaker than "container"/);
    expect(manager.route(request({ code: MEDIUM, tier: 'subprocess' })).denial?.code).toBe('TIER_TOO_WEAK');
  });

  it('allows a weaker tier only when configured', () => {
    const { manager: lenient } = setup(undefined, { allowWeakerTier: true });
    expect(lenient.route(request({ code: HIGH, tier: 'subprocess' }))).toMatchObject({ tier: 'subprocess' });
    expect(lenient.route(request({ code: HIGH, tier: 'subprocess' })).denial).toBeUndefined();
  });

  it('follows a configured routing table', () => {
    const { manager: custom } = setup(undefined, { routing: { medium: 'container' } });
    expect(custom.route(request({ code: MEDIUM })).tier).toBe('container');
  });
});

describe('SandboxManager.prepare: validation', () => {
  const { manager } = setup();
  const field = (req: CodeRequest) => {
    try {
      manager.prepare(req);
    } catch (err) {
      expect(err).toBeInstanceOf(InvalidInputError);
      return (err as InvalidInputError).field;
    }
    return undefined;
  };

  it('accepts a sound request', () => {
    expect(field(request({ stdin: 'x', timeoutMs: 1, env: { A: 'b' } }))).toBeUndefined();
    expect(field(request({ timeoutMs: 60_000 }))).toBeUndefined();
  });

  it.each([
    ['code', request({ code: 'print(1)\0' })],
    ['code', request({ code: 'x'.repeat(1001) })],
    ['code', request({ code: 'é'.repeat(501) })],
    ['stdin', request({ stdin: 'x'.repeat(101) })],
    ['timeoutMs', request({ timeoutMs: 0 })],
    ['timeoutMs', request({ timeoutMs: 60_001 })],
    ['timeoutMs', request({ timeoutMs: 1.5 })],
    ['timeoutMs', request({ timeoutMs: Number.NaN })],
    ['env.LD_PRELOAD', request({ env: { LD_PRELOAD: '/x.so' } })],
    ['env.NODE_OPTIONS', request({ env: { NODE_OPTIONS: '--require /w/x.js' } })],
    ['env.A B', request({ env: { 'A B': '1' } })],
    ['language', request({ language: 'ruby' as never })],
    ['tier', request({ tier: 'vm' as never })],
    ['workspaceDir', request({ workspaceDir: 'relative/ws' })],
  ])('rejects with field %s', (expected, req) => {
    expect(field(req)).toBe(expected);
  });
});

describe('SandboxManager.execute', () => {
  it('runs low risk in the subprocess tier with the built environment and defaults', async () => {
    const { manager, fakes } = setup();
    const onOutput = jest.fn();
    const outcome = await prepareAndRun(manager, request({ env: { FOO: 'bar' }, stdin: 'in' }), { onOutput });
    expect(outcome).toMatchObject({
      status: 'succeeded',
      tier: 'subprocess',
      run: { exitCode: 0, stdout: 'ok\n' },
    });
    const job = fakes.subprocess.runs[0];
    expect(job).toMatchObject({
      actionId: 'act-1',
      stdin: 'in',
      timeoutMs: 30_000,
      workspaceDir: '/srv/ws/ses-1',
    });
    expect(job.env).toMatchObject({ FOO: 'bar', PATH: BASE_ENV.PATH, HOME: '/workspace/.home' });
    expect(job.output).toMatchObject({ maxBytes: 1 << 20, maxLines: 2000 });
    expect(job.onOutput).toBe(onOutput);
    expect(job.output.redact!.length).toBeGreaterThan(0);
  });

  it('denies (never downgrades) when the routed tier is not registered', async () => {
    const { manager, fakes } = setup(['subprocess']);
    const outcome = await prepareAndRun(manager, request({ code: HIGH }));
    expect(outcome.status).toBe('denied');
    expect(outcome.tier).toBe('container');
    expect(outcome.error).toMatchObject({ class: 'policy', code: 'TIER_UNAVAILABLE' });
    expect(outcome.error!.message).toBe('tier "container" is not available: not installed in this engine');
    expect(fakes.subprocess.runs).toHaveLength(0);
  });

  it('denies (never downgrades) when the routed tier says it is unavailable', async () => {
    const { manager, fakes } = setup();
    fakes.pooled.availabilityAnswer = { available: false, reason: 'docker daemon unreachable' };
    const outcome = await prepareAndRun(manager, request({ code: MEDIUM }));
    expect(outcome).toMatchObject({ status: 'denied', tier: 'pooled', error: { class: 'policy' } });
    expect(outcome.error!.message).toContain('docker daemon unreachable');
    expect(fakes.subprocess.runs).toHaveLength(0);
    expect(fakes.container.runs).toHaveLength(0);
  });

  it('records policy denials in the routing, so nothing can run them', () => {
    const { manager } = setup();
    const critical = manager.prepare(request({ language: 'bash', code: CRITICAL }));
    expect(critical).toMatchObject({ denial: { class: 'policy', code: 'RISK_CRITICAL' } });
    expect(critical.risk.level).toBe('critical');
    expect(isRunnable(critical)).toBe(false);
    const weaker = manager.prepare(request({ code: HIGH, tier: 'subprocess' }));
    expect(weaker).toMatchObject({ tier: 'subprocess', denial: { code: 'TIER_TOO_WEAK' } });
    expect(isRunnable(weaker)).toBe(false);
  });

  it('raises a request to a floor tier (a retry never runs weaker than its original)', () => {
    const { manager } = setup();
    expect(manager.route(request({ code: LOW }), 'pooled').tier).toBe('pooled');
    expect(manager.route(request({ code: LOW, tier: 'subprocess' }), 'pooled')).toMatchObject({
      tier: 'pooled',
    });
    expect(manager.route(request({ code: LOW, tier: 'subprocess' }), 'pooled').denial).toBeUndefined();
    // Raising an explicit request is said in the answer, never silent.
    expect(manager.route(request({ code: LOW, tier: 'subprocess' }), 'pooled').risk.reasons).toContainEqual(
      expect.stringContaining('tier "subprocess" was asked for but "pooled" is this action\'s floor'),
    );
    expect(manager.route(request({ code: LOW }), 'pooled').risk.reasons).toEqual([]);
    // The policy's tier wins when it is stronger than the floor; an explicit stronger tier is kept.
    expect(manager.route(request({ code: HIGH }), 'pooled').tier).toBe('container');
    expect(manager.route(request({ code: LOW, tier: 'container' }), 'pooled').tier).toBe('container');
  });

  it('applies per-tier limits: tier output caps, default timeout lowered, a larger explicit timeout denied', async () => {
    const { manager, fakes } = setup(undefined, {
      defaultTimeoutMs: 30_000,
      tierLimits: { pooled: { maxTimeoutMs: 10_000, output: { maxBytes: 4096 } } },
    });
    await prepareAndRun(manager, request({ code: MEDIUM }));
    expect(fakes.pooled.runs[0]).toMatchObject({
      timeoutMs: 10_000,
      output: { maxBytes: 4096, maxLines: 2000 },
    });
    expect(fakes.pooled.runs[0].output.redact!.length).toBeGreaterThan(0);
    await prepareAndRun(manager, request({ code: LOW }));
    expect(fakes.subprocess.runs[0]).toMatchObject({ timeoutMs: 30_000, output: { maxBytes: 1 << 20 } });

    const tooLong = manager.prepare(request({ code: MEDIUM, timeoutMs: 20_000 }));
    expect(tooLong).toMatchObject({
      tier: 'pooled',
      denial: { class: 'policy', code: 'TIMEOUT_ABOVE_TIER_MAX' },
    });
    expect(tooLong.denial!.message).toBe("timeoutMs 20000 exceeds the pooled tier's maximum of 10000 ms");
    expect(fakes.pooled.runs).toHaveLength(1);
    // A stronger tier with the global maximum takes the same request.
    const container = await prepareAndRun(
      manager,
      request({ code: MEDIUM, timeoutMs: 20_000, tier: 'container' }),
    );
    expect(container.status).toBe('succeeded');
    expect(fakes.container.runs[0].timeoutMs).toBe(20_000);
  });

  it('validates before anything can run', () => {
    const { manager, fakes } = setup();
    expect(() => manager.prepare(request({ env: { BASH_ENV: '/x' } }))).toThrow(InvalidInputError);
    expect(fakes.subprocess.runs).toHaveLength(0);
  });

  it('turns a tier failure into an error outcome without leaking unknown messages', async () => {
    const { manager, fakes } = setup();
    fakes.subprocess.runError = new SandboxInternalError('CODE_FILE', 'cannot write the code file: ENOSPC');
    expect(await prepareAndRun(manager, request())).toMatchObject({
      status: 'error',
      error: { class: 'internal', code: 'CODE_FILE', message: 'cannot write the code file: ENOSPC' },
    });
    fakes.subprocess.runError = new Error('EACCES /secret/path');
    const outcome = await prepareAndRun(manager, request());
    expect(outcome.error).toEqual({ class: 'internal', code: 'INTERNAL', message: 'internal sandbox error' });
  });

  it('records a tier at its capacity as a denial of class limit, naming what to raise', async () => {
    const { manager, fakes } = setup();
    fakes.pooled.runError = new PoolExhaustedError(
      'POOL_SESSIONS_EXHAUSTED',
      '16 sessions already hold a pooled container (the limit); end a session or raise SWITCHYARD_POOL_MAX_SESSIONS',
    );
    expect(await prepareAndRun(manager, request({ code: MEDIUM }))).toMatchObject({
      status: 'denied',
      tier: 'pooled',
      error: {
        class: 'limit',
        code: 'POOL_SESSIONS_EXHAUSTED',
        message: expect.stringContaining('SWITCHYARD_POOL'),
      },
    });
  });

  it('records what a tier cannot give as a denial of class policy, with its reason', async () => {
    const { manager, fakes } = setup();
    fakes.pooled.runError = new (class extends SandboxError {
      readonly code = 'JOB_UNSUPPORTED';
      readonly kind: ErrorKind = 'unprocessable';
    })('this tier cannot give the job what it asks for');
    expect(await prepareAndRun(manager, request({ code: MEDIUM }))).toMatchObject({
      status: 'denied',
      tier: 'pooled',
      error: {
        class: 'policy',
        code: 'JOB_UNSUPPORTED',
        message: 'this tier cannot give the job what it asks for',
      },
    });
  });

  it('reports availability for every tier', async () => {
    const { manager, fakes } = setup(['subprocess', 'pooled']);
    fakes.pooled.availabilityAnswer = { available: false, reason: 'no docker' };
    expect(await manager.availability()).toEqual({
      subprocess: { available: true },
      pooled: { available: false, reason: 'no docker' },
      container: { available: false, reason: 'not installed in this engine' },
    });
  });

  it('releases a session in every tier', async () => {
    const { manager, fakes } = setup();
    await manager.releaseSession('ses-9');
    expect(Object.values(fakes).map((f) => f.released)).toEqual([['ses-9'], ['ses-9'], ['ses-9']]);
  });

  it('fences a session in the tiers that hold per-session capacity, and skips the others', () => {
    const { manager, fakes } = setup();
    const fenced: string[] = [];
    Object.assign(fakes.pooled, { fenceSession: (sessionId: string) => fenced.push(sessionId) });
    manager.fenceSession('ses-9');
    expect(fenced).toEqual(['ses-9']);
    expect(Object.values(fakes).map((f) => f.released)).toEqual([[], [], []]);
  });

  it('refuses two tiers with one name', () => {
    const options = resolveSandboxOptions();
    expect(
      () =>
        new SandboxManager(
          options,
          new RiskPolicy(),
          [new FakeTier('pooled'), new FakeTier('pooled')],
          kernelsOf(),
        ),
    ).toThrow(/two tiers named "pooled"/);
  });
});

describe('toOutcome', () => {
  const base: TierRunResult = {
    timedOut: false,
    stdout: 'o',
    stderr: 'e',
    truncated: { stdout: false, stderr: false },
    durationMs: 7,
  };
  const map = (r: Partial<TierRunResult>) => toOutcome({ ...base, ...r }, 'subprocess', NO_RISK, 1500);

  it('maps exits, timeouts, limits, spawn errors and aborts', () => {
    expect(map({ exitCode: 0 })).toMatchObject({
      status: 'succeeded',
      run: { exitCode: 0, stdout: 'o', stderr: 'e' },
    });
    expect(map({ exitCode: 0 }).error).toBeUndefined();
    expect(map({ exitCode: 2 })).toMatchObject({ status: 'failed', run: { exitCode: 2 } });
    expect(map({ exitCode: 2 }).error).toBeUndefined();
    expect(map({ timedOut: true, signal: 'SIGKILL' })).toMatchObject({
      status: 'timed_out',
      error: { class: 'timeout', code: 'TIMEOUT', message: 'timed out after 1500 ms' },
    });
    expect(map({ exitCode: 137, limit: { code: 'OUT_OF_MEMORY', message: 'out of memory' } })).toMatchObject({
      status: 'failed',
      run: { exitCode: 137 },
      error: { class: 'limit', code: 'OUT_OF_MEMORY' },
    });
    expect(
      map({ limit: { code: 'OUTPUT_CAP', message: 'cap' }, truncated: { stdout: true, stderr: false } }),
    ).toMatchObject({
      status: 'failed',
      run: { truncated: { stdout: true, stderr: false } },
      error: { class: 'limit', code: 'OUTPUT_CAP' },
    });
    expect(map({ spawnError: 'bwrap: boom' })).toMatchObject({
      status: 'error',
      error: { class: 'spawn', message: 'bwrap: boom' },
    });
    expect(map({ aborted: true })).toMatchObject({ status: 'error', error: { code: 'ABORTED' } });
  });

  it("keeps the tier's result as the outcome's run, as is", () => {
    const observed: TierRunResult = { ...base, exitCode: 0, redacted: true };
    expect(toOutcome(observed, 'subprocess', NO_RISK, 1500).run).toBe(observed);
  });
});

describe('SandboxManager: a session image (a template)', () => {
  const image = { ref: 'switchyard/sandbox-tiny:0123456789ab', env: { TINY: 'yes', SHARED: 'template' } };
  const floor = { minTier: 'pooled' as const, floorReason: 'the template lives in its image' };

  it('runs container-tier code in the image, with the template env under the caller env', async () => {
    const { manager, fakes } = setup();
    const routed = manager.prepare(request({ image, env: { SHARED: 'caller' } }), floor);
    expect(routed.tier).toBe('pooled');
    expect(isRunnable(routed)).toBe(true);
    await manager.execute(routed as Parameters<SandboxManager['execute']>[0]);
    const job = fakes.pooled.runs[0];
    expect(job.image).toBe(image.ref);
    expect(job.env).toMatchObject({ TINY: 'yes', SHARED: 'caller', PATH: BASE_ENV.PATH });

    await prepareAndRun(manager, request({ image, code: HIGH }));
    expect(fakes.container.runs[0]).toMatchObject({ image: image.ref, env: { TINY: 'yes' } });
  });

  it('raises an explicit weaker tier to the floor and says why', () => {
    const { manager } = setup();
    const routed = manager.prepare(request({ image, tier: 'subprocess' }), floor);
    expect(routed.tier).toBe('pooled');
    expect(routed.risk.reasons.join(' ')).toContain('the template lives in its image');
  });

  it('gives the subprocess tier the image (it runs its root) and its env, when no floor keeps the code out', async () => {
    const { manager, fakes } = setup();
    await prepareAndRun(manager, request({ image }));
    expect(fakes.subprocess.runs[0].image).toBe(image.ref);
    expect(fakes.subprocess.runs[0].env.TINY).toBe('yes');
  });
});

describe("SandboxManager with an operator's trusted CAs", () => {
  const trustedCa = { bundle: '/d/sandbox-ca/ca-bundle.pem', extra: '/d/sandbox-ca/extra-ca.pem' };

  it('names them in every tier’s environment and binds them into the subprocess tier', async () => {
    const { manager, fakes, resolved } = setup(['subprocess', 'pooled', 'container'], { trustedCa });
    expect(resolved.extraReadOnlyBinds).toEqual([trustedCa.bundle, trustedCa.extra]);
    for (const tier of ['subprocess', 'pooled', 'container'] as const) {
      await prepareAndRun(manager, request({ tier }));
      expect(fakes[tier].runs[0].env).toMatchObject({
        SSL_CERT_FILE: trustedCa.bundle,
        PIP_CERT: trustedCa.bundle,
        NODE_EXTRA_CA_CERTS: trustedCa.extra,
        PIP_BREAK_SYSTEM_PACKAGES: '1',
      });
    }
    // The caller's own value wins: it only changes what that caller's code trusts.
    await prepareAndRun(manager, request({ env: { SSL_CERT_FILE: '/workspace/mine.pem' } }));
    expect(fakes.subprocess.runs[1].env.SSL_CERT_FILE).toBe('/workspace/mine.pem');
  });

  it('adds nothing without them', async () => {
    const { manager, fakes } = setup(['subprocess']);
    await prepareAndRun(manager, request());
    expect(fakes.subprocess.runs[0].env.SSL_CERT_FILE).toBeUndefined();
    expect(manager.trustEnv()).toEqual({});
  });
});
