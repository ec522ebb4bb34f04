import { Global, Module } from '@nestjs/common';
import { UpgradeRoutes } from './upgrade-routes';

/** The HTTP server's upgrades (WebSockets), routed by path: global, so every feature registers its own route. */
@Global()
@Module({ providers: [UpgradeRoutes], exports: [UpgradeRoutes] })
export class UpgradesModule {}
