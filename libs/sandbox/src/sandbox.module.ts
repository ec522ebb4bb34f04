import { Global, Module, type DynamicModule, type ModuleMetadata, type Type } from '@nestjs/common';
import { RiskPolicy } from './risk/risk-policy';
import { SANDBOX_OPTIONS, SANDBOX_TIERS } from './sandbox.constants';
import { SandboxManager } from './sandbox-manager.service';
import {
  resolveSandboxOptions,
  type ResolvedSandboxOptions,
  type SandboxModuleOptions,
} from './sandbox.options';
import type { SandboxTier } from './sandbox-tier.port';
import { BubblewrapTier } from './subprocess/bubblewrap-tier';
import { detectProcessLimiter } from './subprocess/cgroup-limiter';
import { ChildProcessLauncher, ProcessLauncher } from './subprocess/process-launcher';
import { ProcessLimiter } from './subprocess/process-limiter';

/** Tiers beyond the built-in subprocess tier, e.g. the container tiers, and the modules they need. */
export interface SandboxTierExtensions {
  tiers?: Array<Type<SandboxTier>>;
  imports?: ModuleMetadata['imports'];
}

/**
 * Risk policy, sandbox manager and tiers. Global: the engine imports it once with
 * `SandboxModule.forRoot(options)`; every option has a documented default (see `SandboxModuleOptions`).
 */
@Global()
@Module({})
export class SandboxModule {
  static forRoot(options: SandboxModuleOptions = {}, extensions: SandboxTierExtensions = {}): DynamicModule {
    const extra = extensions.tiers ?? [];
    return {
      module: SandboxModule,
      imports: extensions.imports ?? [],
      providers: [
        { provide: SANDBOX_OPTIONS, useValue: resolveSandboxOptions(options) },
        {
          provide: RiskPolicy,
          useFactory: (o: ResolvedSandboxOptions) => new RiskPolicy(o.risk),
          inject: [SANDBOX_OPTIONS],
        },
        { provide: ProcessLauncher, useClass: ChildProcessLauncher },
        {
          provide: ProcessLimiter,
          useFactory: (o: ResolvedSandboxOptions) => detectProcessLimiter(o.subprocess.cgroup),
          inject: [SANDBOX_OPTIONS],
        },
        BubblewrapTier,
        ...extra,
        {
          provide: SANDBOX_TIERS,
          useFactory: (...tiers: SandboxTier[]) => tiers,
          inject: [BubblewrapTier, ...extra],
        },
        SandboxManager,
      ],
      exports: [SANDBOX_OPTIONS, RiskPolicy, SandboxManager, SANDBOX_TIERS, BubblewrapTier],
    };
  }
}
