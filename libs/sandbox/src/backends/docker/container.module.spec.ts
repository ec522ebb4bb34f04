import * as os from 'node:os';
import * as path from 'node:path';
import { Injectable, Inject, Logger, Module } from '@nestjs/common';
import { Test } from '@nestjs/testing';
import Dockerode from 'dockerode';
import { SANDBOX_TIERS } from '../../core/sandbox.constants';
import { SandboxManager } from '../../sandbox-manager.service';
import { SandboxModule } from '../../sandbox.module';
import type { SandboxTier } from '../../core/sandbox-tier.port';
import { CONTAINER_OPTIONS } from './container.constants';
import { ContainerModule, DockerModule } from './container.module';
import type { ResolvedContainerOptions } from './container.options';
import { ContainerTier } from './container-tier';
import { DOCKER_CLIENT, DockerodeClient, type DockerClient } from './docker-client';

const bogusSocket = path.join(os.tmpdir(), `no-docker-${process.pid}.sock`);

/** Another tier's provider (the pooled tier) injecting the shared client. */
@Injectable()
class SharesTheClient {
  constructor(@Inject(DOCKER_CLIENT) readonly docker: DockerClient) {}
}
@Module({ providers: [SharesTheClient], exports: [SharesTheClient] })
class OtherTierModule {}

describe('ContainerModule', () => {
  beforeAll(() => Logger.overrideLogger(false));

  it('registers the container tier with the sandbox manager and shares one Docker client', async () => {
    const moduleRef = await Test.createTestingModule({
      imports: [
        SandboxModule.forRoot(
          { subprocess: { cgroup: { mode: 'off' } } },
          {
            imports: [
              ContainerModule.forRoot(
                { image: 'switchyard/sandbox:x', reapOnStart: false, limits: { pids: 64 } },
                { docker: { socketPath: bogusSocket } },
              ),
              OtherTierModule,
            ],
            tiers: [ContainerTier],
          },
        ),
      ],
    }).compile();
    try {
      const tiers = moduleRef.get<SandboxTier[]>(SANDBOX_TIERS);
      expect(tiers.map((t) => t.name)).toEqual(['subprocess', 'container']);
      const client = moduleRef.get<DockerClient>(DOCKER_CLIENT);
      expect(client).toBeInstanceOf(DockerodeClient);
      expect(client.endpoint).toBe(`unix://${bogusSocket}`);
      expect(moduleRef.get(SharesTheClient).docker).toBe(client);
      expect(moduleRef.get<ResolvedContainerOptions>(CONTAINER_OPTIONS).limits.pids).toBe(64);
      const availability = await moduleRef.get(SandboxManager).availability();
      expect(availability.container).toMatchObject({
        available: false,
        reason: expect.stringContaining('npm run docker:engine'),
      });
    } finally {
      await moduleRef.close();
    }
  });

  it('takes a ready Dockerode, and can leave the client to a DockerModule imported elsewhere', async () => {
    const dockerode = new Dockerode({ socketPath: bogusSocket });
    expect(ContainerModule.forRoot({}, false).imports).toEqual([]);
    const moduleRef = await Test.createTestingModule({
      imports: [
        DockerModule.forRoot({ docker: dockerode }),
        ContainerModule.forRoot({ reapOnStart: false }, false),
      ],
    }).compile();
    expect(moduleRef.get<DockerClient>(DOCKER_CLIENT).endpoint).toBe(`unix://${bogusSocket}`);
    expect(moduleRef.get<ResolvedContainerOptions>(CONTAINER_OPTIONS).reapOnStart).toBe(false);
    await moduleRef.close();
  });
});
