import { Logger } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import { DOCKER_CLIENT } from '../docker-client';
import { SANDBOX_TIERS } from '../../../core/sandbox.constants';
import { SandboxModule } from '../../../sandbox.module';
import type { SandboxTier } from '../../../core/sandbox-tier.port';
import { HostMounts } from './host-mounts';
import { POOLED_OPTIONS } from './pooled.constants';
import { PooledTierModule } from './pooled.module';
import type { ResolvedPooledOptions } from './pooled.options';
import { PooledTier } from './pooled-tier';

describe('PooledTierModule', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('registers the pooled tier with the sandbox module, its options resolved at boot', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        SandboxModule.forRoot(
          { subprocess: { cgroup: { mode: 'off' } } },
          {
            imports: [PooledTierModule.forRoot({ image: 'switchyard/sandbox:x', min: 1, max: 3 })],
            tiers: [PooledTier],
          },
        ),
      ],
    })
      .overrideProvider(DOCKER_CLIENT)
      .useValue({ endpoint: 'fake://' })
      .overrideProvider(HostMounts)
      .useValue({})
      .compile();
    const tiers = moduleRef.get<SandboxTier[]>(SANDBOX_TIERS);
    expect(tiers.map((t) => t.name)).toEqual(['subprocess', 'pooled']);
    expect(tiers[1]).toBeInstanceOf(PooledTier);
    expect(moduleRef.get<ResolvedPooledOptions>(POOLED_OPTIONS)).toMatchObject({
      image: 'switchyard/sandbox:x',
      min: 1,
      max: 3,
    });
  });

  it('fails at boot on an option that cannot work, naming it', () => {
    expect(() => PooledTierModule.forRoot({ min: 5, max: 2 })).toThrow('sandbox option pooled.min');
  });
});
