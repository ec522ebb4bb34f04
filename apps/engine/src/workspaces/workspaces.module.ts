import { Global, Module } from '@nestjs/common';
import { HostWorkspaces } from './host-workspaces';
import { SessionWorkspaces } from './session-workspaces';

/** Sessions' workspaces as the engine reaches them (global: sessions, handlers, checkpoints and MCP use them). */
@Global()
@Module({
  providers: [{ provide: SessionWorkspaces, useClass: HostWorkspaces }],
  exports: [SessionWorkspaces],
})
export class WorkspacesModule {}
