import { Global, Module, type DynamicModule } from '@nestjs/common';
import Dockerode from 'dockerode';
import { CONTAINER_OPTIONS } from './container.constants';
import { resolveContainerOptions, type ContainerTierOptions } from './container.options';
import { DOCKER_CLIENT, DockerodeClient } from './docker-client';

export interface DockerModuleOptions {
  /** A ready `Dockerode`, or its connection options. Default: a client for `host`. */
  docker?: Dockerode | Dockerode.DockerOptions;
  /**
   * The engine's address in DOCKER_HOST's form (`unix:///var/run/docker.sock`, `tcp://host:2375`). Default: the local
   * socket. Given by the engine's configuration, so the client never reads the environment itself.
   */
  host?: string;
  /** Deadline of every Docker call except waiting for a container. Default 30 000 ms. */
  callTimeoutMs?: number;
}

/** Connection options for a DOCKER_HOST-style address; the local socket when none is given. */
export function dockerConnection(host: string | undefined): Dockerode.DockerOptions {
  if (!host) return { socketPath: '/var/run/docker.sock' };
  if (host.startsWith('unix://')) return { socketPath: host.slice('unix://'.length) };
  if (host.startsWith('npipe://')) return { socketPath: host.slice('npipe://'.length) };
  const url = new URL(host.includes('//') ? host : `tcp://${host}`);
  const protocol = url.protocol === 'https:' ? 'https' : 'http';
  return { host: url.hostname, port: url.port || (protocol === 'https' ? 2376 : 2375), protocol };
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
              options.docker instanceof Dockerode
                ? options.docker
                : new Dockerode(options.docker ?? dockerConnection(options.host)),
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
