import { Global, Module, type DynamicModule } from '@nestjs/common';
import { SYSTEM_ROOT } from '../../core/system-root.port';
import { DOCKER_CLIENT, type DockerClient } from './docker-client';
import { ImageRoots, type ImageRootsOptions } from './image-roots';

/**
 * The sandbox images' roots for the subprocess tier, under `SYSTEM_ROOT`, from the Docker client `DockerModule`
 * provides (import that too). Global: the subprocess tier lives in the sandbox module.
 */
@Global()
@Module({})
export class ImageRootsModule {
  static forRoot(options: ImageRootsOptions): DynamicModule {
    return {
      module: ImageRootsModule,
      providers: [
        {
          provide: SYSTEM_ROOT,
          useFactory: (docker: DockerClient) => new ImageRoots(docker, options),
          inject: [DOCKER_CLIENT],
        },
      ],
      exports: [SYSTEM_ROOT],
    };
  }
}
