import { InvalidInputError, type Tier } from '@switchyard/common';
import {
  CALL_DIR_TARGET,
  CALL_SOCKET_TARGET,
  pooledCallSocketName,
  withCallSocket,
} from './core/call-channel';
import { buildContainerSpec } from './backends/docker/container-spec';
import { resolveContainerOptions } from './backends/docker/container.options';
import { validateEnv } from './core/env-policy';
import { RiskPolicy } from './risk/risk-policy';
import { resolveSandboxOptions } from './core/sandbox.options';
import { SandboxManager } from './sandbox-manager.service';
import { SandboxTier } from './core/sandbox-tier.port';
import { kernelsOf } from './sandbox-manager.testing';
import {
  CALL_SOCKET_ENV,
  isRunnable,
  type CallChannel,
  type CodeRequest,
  type TierAvailability,
  type TierJob,
  type TierRunResult,
} from './core/sandbox.types';

/** Records the jobs it was given. */
class RecordingTier extends SandboxTier {
  readonly jobs: TierJob[] = [];

  constructor(readonly name: Tier) {
    super();
  }

  async availability(): Promise<TierAvailability> {
    return { available: true };
  }

  async run(job: TierJob): Promise<TierRunResult> {
    this.jobs.push(job);
    return {
      exitCode: 0,
      timedOut: false,
      stdout: '',
      stderr: '',
      truncated: { stdout: false, stderr: false },
      durationMs: 1,
    };
  }

  async releaseSession(): Promise<void> {}
}

const channel: CallChannel = {
  socketDir: '/srv/engine/calls/act_1',
  listen: () => Promise.resolve(async () => undefined),
};

function setup() {
  const options = resolveSandboxOptions({});
  const tiers = (['subprocess', 'pooled', 'container'] as const).map((t) => new RecordingTier(t));
  const manager = new SandboxManager(options, new RiskPolicy(options.risk), tiers, kernelsOf());
  return { manager, tiers: Object.fromEntries(tiers.map((t) => [t.name, t])) as Record<Tier, RecordingTier> };
}

const request = (overrides: Partial<CodeRequest> = {}): CodeRequest => ({
  actionId: 'act_1',
  sessionId: 'ses_1',
  language: 'python',
  code: 'print(1)',
  workspaceDir: '/srv/ws/ses_1',
  channel,
  ...overrides,
});

describe('call channel: the sandbox manager', () => {
  it('refuses a channel with state "session" (field state): a kernel cell cannot have one', () => {
    const { manager } = setup();
    let thrown: unknown;
    try {
      manager.prepare(request({ state: 'session' }));
    } catch (err) {
      thrown = err;
    }
    expect(thrown).toBeInstanceOf(InvalidInputError);
    expect(thrown).toMatchObject({ field: 'state', code: 'CHANNEL_WITH_SESSION_STATE' });
    // The same request without a channel is a kernel cell like any other.
    expect(manager.prepare(request({ state: 'session', channel: undefined })).tier).toBe('subprocess');
  });

  it.each(['subprocess', 'pooled', 'container'] as const)(
    'hands a fresh run its channel (%s)',
    async (tier) => {
      const { manager, tiers } = setup();
      const routed = manager.prepare(request({ tier }));
      if (!isRunnable(routed)) throw new Error('not runnable');
      await manager.execute(routed);
      expect(tiers[tier].jobs).toHaveLength(1);
      expect(tiers[tier].jobs[0].channel).toBe(channel);
      // The path is the tier's to set: the routed environment never carries one.
      expect(tiers[tier].jobs[0].env[CALL_SOCKET_ENV]).toBeUndefined();
    },
  );

  it('gives a run without a channel none', async () => {
    const { manager, tiers } = setup();
    const routed = manager.prepare(request({ channel: undefined }));
    if (!isRunnable(routed)) throw new Error('not runnable');
    await manager.execute(routed);
    expect(tiers.subprocess.jobs[0]).not.toHaveProperty('channel');
  });

  it.each([CALL_SOCKET_ENV, 'switchyard_call_socket'])("refuses a caller's own %s in env", (key) => {
    const { manager } = setup();
    expect(() => manager.prepare(request({ env: { [key]: '/workspace/mine.sock' } }))).toThrow(
      expect.objectContaining({ field: `env.${key}`, code: 'ENV_KEY_DENIED' }),
    );
    expect(() => validateEnv({ [key]: '/tmp/x.sock' })).toThrow(InvalidInputError);
  });
});

describe('call channel: the child environment', () => {
  it("sets the tier's path last, over any entry already there", () => {
    const env = { PATH: '/usr/bin', [CALL_SOCKET_ENV]: '/tmp/forged.sock' };
    expect(withCallSocket(env, CALL_SOCKET_TARGET)).toEqual({
      PATH: '/usr/bin',
      [CALL_SOCKET_ENV]: '/run/switchyard-call/call.sock',
    });
    expect(env[CALL_SOCKET_ENV]).toBe('/tmp/forged.sock'); // a copy: the job's own env is left alone
  });

  it('removes any such entry from a run without a channel', () => {
    expect(withCallSocket({ PATH: '/usr/bin', [CALL_SOCKET_ENV]: '/tmp/forged.sock' }, undefined)).toEqual({
      PATH: '/usr/bin',
    });
  });

  it('names a pooled run socket after its action, safely', () => {
    expect(pooledCallSocketName('act_0123abcd')).toBe('call-act_0123abcd.sock');
    expect(pooledCallSocketName('../../etc/x y')).toBe('call-.._.._etc_x_y.sock');
    expect(pooledCallSocketName('a'.repeat(100))).toBe(`call-${'a'.repeat(40)}.sock`);
  });
});

describe('call channel: the one-off container spec', () => {
  const options = resolveContainerOptions({ image: 'switchyard/sandbox:test', reapOnStart: false });
  const job = (extra: Partial<TierJob> = {}) => ({
    actionId: 'act_1',
    sessionId: 'ses_1',
    language: 'python' as const,
    code: 'print(1)',
    env: { PATH: '/usr/bin', [CALL_SOCKET_ENV]: '/tmp/forged.sock' },
    workspaceDir: '/srv/ws/ses_1',
    ...extra,
  });

  it("binds the channel's directory read-only and names its socket", () => {
    const spec = buildContainerSpec({ job: job({ channel }), image: 'img', options, hostsFile: '/h/hosts' });
    expect(spec.HostConfig?.Binds).toEqual([
      '/srv/ws/ses_1:/workspace:rw',
      '/h/hosts:/etc/hosts:ro',
      `/srv/engine/calls/act_1:${CALL_DIR_TARGET}:ro`,
    ]);
    expect(spec.Env).toEqual(['PATH=/usr/bin', `${CALL_SOCKET_ENV}=/run/switchyard-call/call.sock`]);
    expect(spec.HostConfig?.NetworkMode).toBe('none');
  });

  it('binds nothing and names nothing without a channel', () => {
    const spec = buildContainerSpec({ job: job(), image: 'img', options, hostsFile: '/h/hosts' });
    expect(spec.HostConfig?.Binds).toEqual(['/srv/ws/ses_1:/workspace:rw', '/h/hosts:/etc/hosts:ro']);
    expect(spec.Env).toEqual(['PATH=/usr/bin']);
  });
});
