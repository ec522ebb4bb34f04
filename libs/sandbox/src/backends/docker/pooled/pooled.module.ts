import { Module, type DynamicModule } from '@nestjs/common';
import { DockerModule, type DockerModuleOptions } from '../container.module';
import { ChildProcessHostMounts, HostMounts } from './host-mounts';
import { POOLED_OPTIONS } from './pooled.constants';
import { resolvePooledOptions, type PooledOptions } from './pooled.options';

/**
 * Options and host-mount adapter of the pooled tier, plus the shared Docker client (`DOCKER_CLIENT`). Register the
 * tier itself with the sandbox module:
 *
 * ```ts
 * SandboxModule.forRoot(sandboxOptions, {
 *   imports: [PooledTierModule.forRoot({ min: 2, max: 8 })],
 *   tiers: [PooledTier],
 * });
 * ```
 *
 * Pass `docker: false` when `DockerModule` is imported elsewhere (e.g. by `ContainerModule`).
 */
@Module({})
export class PooledTierModule {
  static forRoot(options: PooledOptions = {}, docker: DockerModuleOptions | false = {}): DynamicModule {
    return {
      module: PooledTierModule,
      imports: docker === false ? [] : [DockerModule.forRoot(docker)],
      providers: [
        { provide: POOLED_OPTIONS, useValue: resolvePooledOptions(options) },
        { provide: HostMounts, useFactory: () => new ChildProcessHostMounts() },
      ],
      exports: [POOLED_OPTIONS, HostMounts],
    };
  }
}
