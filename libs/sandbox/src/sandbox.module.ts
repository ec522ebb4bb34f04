import {
  Global,
  Module,
  Injectable,
  type DynamicModule,
  type ModuleMetadata,
  type OnApplicationShutdown,
  type Type,
} from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import { RiskPolicy } from './risk/risk-policy';
import { SANDBOX_OPTIONS, SANDBOX_TIERS } from './core/sandbox.constants';
import { SandboxManager } from './sandbox-manager.service';
import {
  resolveSandboxOptions,
  type ResolvedSandboxOptions,
  type SandboxModuleOptions,
} from './core/sandbox.options';
import type { SandboxTier } from './core/sandbox-tier.port';
import { SessionKernels } from './core/stateful/session-kernels';
import { SessionProcesses } from './core/stateful/session-processes';
import { SessionTerminals } from './core/stateful/session-terminals';
import { SessionPorts } from './core/stateful/session-ports';
import type { StatefulBoxHost } from './core/stateful/stateful-box.port';
import { BubblewrapTier } from './backends/subprocess/bubblewrap-tier';
import { detectProcessLimiter } from './backends/subprocess/cgroup-limiter';
import { ProcessLauncher } from './backends/subprocess/process-launcher';
import { SpawnerProcessLauncher } from './backends/subprocess/spawner-launcher';
import { ProcessLimiter } from './backends/subprocess/process-limiter';

/** Tiers beyond the built-in subprocess tier, e.g. the container tiers, and the modules they need. */
export interface SandboxTierExtensions {
  tiers?: Array<Type<SandboxTier>>;
  imports?: ModuleMetadata['imports'];
}

/** A runner that has not answered this long past a cell's timeout and grace is taken for hung. */
const RUNNER_GRACE_MS = 5000;

const statefulHosts = (tiers: SandboxTier[]): StatefulBoxHost[] =>
  tiers.flatMap((t) => (t.stateful ? [t.stateful] : []));

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
        { provide: ProcessLauncher, useClass: SpawnerProcessLauncher },
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
        {
          provide: SessionKernels,
          useFactory: (o: ResolvedSandboxOptions, tiers: SandboxTier[], clock?: Clock) =>
            new SessionKernels(
              statefulHosts(tiers),
              {
                idleMs: o.stateful.kernelIdleMs,
                interruptGraceMs: o.stateful.interruptGraceMs,
                runnerGraceMs: RUNNER_GRACE_MS,
                results: {
                  maxBytes: o.stateful.resultMaxBytes,
                  cellMaxBytes: o.stateful.cellResultsMaxBytes,
                },
              },
              clock ?? systemClock,
            ),
          inject: [SANDBOX_OPTIONS, SANDBOX_TIERS, { token: CLOCK, optional: true }],
        },
        {
          provide: SessionProcesses,
          useFactory: (o: ResolvedSandboxOptions, tiers: SandboxTier[], clock?: Clock) =>
            new SessionProcesses(
              statefulHosts(tiers),
              {
                maxPerSession: o.stateful.maxProcessesPerSession,
                maxPerSessionSetting: o.stateful.settingNames.maxProcessesPerSession,
                logBytes: o.stateful.processLogBytes,
                redact: o.output.redact ?? [],
              },
              clock ?? systemClock,
            ),
          inject: [SANDBOX_OPTIONS, SANDBOX_TIERS, { token: CLOCK, optional: true }],
        },
        {
          provide: SessionPorts,
          useFactory: (
            o: ResolvedSandboxOptions,
            tiers: SandboxTier[],
            kernels: SessionKernels,
            processes: SessionProcesses,
            terminals: SessionTerminals,
          ) =>
            new SessionPorts(
              statefulHosts(tiers),
              // A server lives where the session's processes, kernels and terminals do.
              (sessionId) => [
                ...new Set([
                  ...processes.liveTiers(sessionId),
                  ...kernels.liveTiers(sessionId),
                  ...terminals.liveTiers(sessionId),
                ]),
              ],
              o.ports,
            ),
          inject: [SANDBOX_OPTIONS, SANDBOX_TIERS, SessionKernels, SessionProcesses, SessionTerminals],
        },
        {
          provide: SessionTerminals,
          useFactory: (o: ResolvedSandboxOptions, tiers: SandboxTier[], clock?: Clock) =>
            new SessionTerminals(
              statefulHosts(tiers),
              {
                maxPerSession: o.stateful.maxTerminalsPerSession,
                maxPerSessionSetting: o.stateful.settingNames.maxTerminalsPerSession,
                idleMs: o.stateful.terminalIdleMs,
                scrollbackBytes: o.stateful.terminalScrollbackBytes,
              },
              clock ?? systemClock,
            ),
          inject: [SANDBOX_OPTIONS, SANDBOX_TIERS, { token: CLOCK, optional: true }],
        },
        StatefulShutdown,
        SandboxManager,
      ],
      exports: [
        SANDBOX_OPTIONS,
        RiskPolicy,
        SandboxManager,
        SANDBOX_TIERS,
        BubblewrapTier,
        SessionKernels,
        SessionProcesses,
        SessionPorts,
        SessionTerminals,
      ],
    };
  }
}

/**
 * Shutdown of kernels, processes and terminals: no new one starts and their records end, before the tiers (their
 * owners of the boxes) kill everything in them.
 */
@Injectable()
class StatefulShutdown implements OnApplicationShutdown {
  constructor(
    private readonly kernels: SessionKernels,
    private readonly processes: SessionProcesses,
    private readonly terminals: SessionTerminals,
  ) {}

  onApplicationShutdown(): void {
    this.kernels.close();
    this.processes.close();
    this.terminals.shutdown();
  }
}
