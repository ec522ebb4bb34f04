import { Module, type OnApplicationBootstrap } from '@nestjs/common';
import { PortsModule } from '../../engine/ports/ports.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { UpgradeRoutes } from '../http/upgrade-routes';
import { PortAuth } from './port-auth';
import { PortProxy } from './port-proxy';
import { PortsController } from './ports.controller';

/**
 * A session's ports at the edge: the REST endpoints (`GET …/ports`, `POST …/ports/{port}/preview`), the proxy
 * (`PortProxy`, installed as Express middleware by the bootstrap, before the JSON body parser would read its bodies)
 * and its WebSocket upgrades, registered with the engine's one upgrade router.
 */
@Module({
  imports: [PortsModule, SessionsModule],
  controllers: [PortsController],
  providers: [PortAuth, PortProxy],
  exports: [PortProxy],
})
export class PortsApiModule implements OnApplicationBootstrap {
  constructor(
    private readonly routes: UpgradeRoutes,
    private readonly proxy: PortProxy,
  ) {}

  onApplicationBootstrap(): void {
    this.routes.register({
      name: '/v1/sessions/{sessionId}/ports/{port}/{path…} (and preview hosts)',
      match: (_pathname, req) => this.proxy.claims(req),
      byHost: true,
      sessionOf: (req) => this.proxy.sessionOf(req),
      handle: (req, socket, head) => this.proxy.upgrade(req, socket, head),
    });
  }
}
