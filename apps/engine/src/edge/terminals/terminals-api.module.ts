import { Module } from '@nestjs/common';
import { ActionsModule } from '../../engine/actions/actions.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { TerminalSockets } from './terminal-sockets';
import { TerminalsController } from './terminals.controller';

/** A session's terminals: their REST endpoints and their WebSocket, over the actions that open and close them. */
@Module({
  imports: [ActionsModule, SessionsModule],
  controllers: [TerminalsController],
  providers: [TerminalSockets],
})
export class TerminalsApiModule {}
