import { Module } from '@nestjs/common';
import { MetricsModule } from '../../platform/metrics/metrics.module';
import { EventsModule } from '../../session/events/events.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { ActionEnvelopes } from '../actions/action-envelope';
import { PortConnections } from './port-connections';

/** The record of the connections the engine proxies to sessions' ports (`PortConnections`). */
@Module({
  imports: [EventsModule, SessionsModule, MetricsModule],
  providers: [ActionEnvelopes, PortConnections],
  exports: [PortConnections],
})
export class PortsModule {}
