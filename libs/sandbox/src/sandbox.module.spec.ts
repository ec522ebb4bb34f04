import { Injectable, Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { SANDBOX_OPTIONS, SANDBOX_TIERS } from './core/sandbox.constants';
import { SandboxManager } from './sandbox-manager.service';
import { SandboxModule } from './sandbox.module';
import type { ResolvedSandboxOptions } from './core/sandbox.options';
import { SandboxTier } from './core/sandbox-tier.port';
import { isRunnable, type TierAvailability, type TierRunResult } from './core/sandbox.types';
import { BubblewrapTier } from './backends/subprocess/bubblewrap-tier';

/** Stands in for a container tier registered from another module. */
@Injectable()
class FakePooledTier extends SandboxTier {
  readonly name = 'pooled' as const;
  async availability(): Promise<TierAvailability> {
    return { available: true };
  }
  async run(): Promise<TierRunResult> {
    return {
      timedOut: false,
      exitCode: 0,
      stdout: 'pooled',
      stderr: '',
      truncated: { stdout: false, stderr: false },
      durationMs: 1,
    };
  }
  async releaseSession(): Promise<void> {}
}

describe('SandboxModule', () => {
  beforeAll(() => {
    Logger.overrideLogger(false);
  });

  it('wires options, the subprocess tier and extra tiers into the manager', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        SandboxModule.forRoot(
          { defaultTimeoutMs: 5000, subprocess: { cgroup: { mode: 'off' } } },
          { tiers: [FakePooledTier] },
        ),
      ],
    }).compile();
    const options = moduleRef.get<ResolvedSandboxOptions>(SANDBOX_OPTIONS);
    expect(options).toMatchObject({
      defaultTimeoutMs: 5000,
      maxTimeoutMs: 300_000,
      output: { maxBytes: 1 << 20, maxLines: 2000 },
    });
    const tiers = moduleRef.get<SandboxTier[]>(SANDBOX_TIERS);
    expect(tiers.map((t) => t.name)).toEqual(['subprocess', 'pooled']);
    expect(tiers[0]).toBeInstanceOf(BubblewrapTier);

    const manager = moduleRef.get(SandboxManager);
    const routed = manager.prepare({
      actionId: 'a',
      sessionId: 's',
      language: 'python',
      code: 'print(1)',
      tier: 'pooled',
      workspaceDir: '/nonexistent',
    });
    if (!isRunnable(routed)) throw new Error('expected a runnable request');
    const outcome = await manager.execute(routed);
    expect(outcome).toMatchObject({ status: 'succeeded', tier: 'pooled', run: { stdout: 'pooled' } });
    expect((await manager.availability()).container).toEqual({
      available: false,
      reason: 'not installed in this engine',
    });
    await moduleRef.close();
  });

  it('fails at boot on bad options, naming the option', () => {
    expect(() => SandboxModule.forRoot({ maxTimeoutMs: 0 })).toThrow(/maxTimeoutMs/);
    expect(() => SandboxModule.forRoot({ defaultTimeoutMs: 10, maxTimeoutMs: 5 })).toThrow(
      /defaultTimeoutMs/,
    );
    expect(() => SandboxModule.forRoot({ bwrapPath: 'bwrap' })).toThrow(
      /bwrapPath: must be an absolute path/,
    );
    expect(() => SandboxModule.forRoot({ routing: { low: 'vm' as never } })).toThrow(/routing.low/);
    expect(() => SandboxModule.forRoot({ output: { redact: ['(unclosed'] } })).toThrow(/output.redact\[0\]/);
    expect(() => SandboxModule.forRoot({ output: { redact: ['ok-[0-9]+', 'x*'] } })).toThrow(
      /output.redact\[1\]: matches the empty string/,
    );
  });
});
