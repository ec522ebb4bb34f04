import { Global, Module, type DynamicModule } from '@nestjs/common';
import Dockerode from 'dockerode';
import { CONTAINER_OPTIONS } from './container.constants';
import { resolveContainerOptions, type ContainerTierOptions } from './container.options';
import { DOCKER_CLIENT, DockerodeClient } from './docker-client';

export interface DockerModuleOptions {
  /** A ready `Dockerode`, or its connection options. Default `new Dockerode()`, which reads `DOCKER_HOST`. */
  docker?: Dockerode | Dockerode.DockerOptions;
  /** Deadline of every Docker call except waiting for a container. Default 30 000 ms. */
  callTimeoutMs?: number;
}

/**
 * The engine's one Docker client, under `DOCKER_CLIENT`. Global and imported once, so the one-off and pooled
 * container tiers share it.
 */
@Global()
@Module({})
export class DockerModule {
  static forRoot(options: DockerModuleOptions = {}): DynamicModule {
    return {
      module: DockerModule,
      providers: [
        {
          provide: DOCKER_CLIENT,
          useFactory: () =>
            new DockerodeClient(
              options.docker instanceof Dockerode ? options.docker : new Dockerode(options.docker),
              { callTimeoutMs: options.callTimeoutMs },
            ),
        },
      ],
      exports: [DOCKER_CLIENT],
    };
  }
}

/**
 * Options of the one-off container tier, resolved (and validated) at boot, plus the Docker client. Register the tier
 * itself with the sandbox module:
 *
 * ```ts
 * SandboxModule.forRoot(sandboxOptions, {
 *   imports: [ContainerModule.forRoot({ limits: { memoryBytes: 256 * 2 ** 20 } })],
 *   tiers: [ContainerTier],
 * });
 * ```
 *
 * Pass `docker: false` when `DockerModule` is imported elsewhere (e.g. by the pooled tier's module).
 */
@Module({})
export class ContainerModule {
  static forRoot(
    options: ContainerTierOptions = {},
    docker: DockerModuleOptions | false = {},
  ): DynamicModule {
    return {
      module: ContainerModule,
      imports: docker === false ? [] : [DockerModule.forRoot(docker)],
      providers: [{ provide: CONTAINER_OPTIONS, useValue: resolveContainerOptions(options) }],
      exports: [CONTAINER_OPTIONS],
    };
  }
}
