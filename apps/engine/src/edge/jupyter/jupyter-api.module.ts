import { Module } from '@nestjs/common';
import { ActionsModule } from '../../engine/actions/actions.module';
import { EventsModule } from '../../session/events/events.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { JupyterCells } from './jupyter-cells';
import { JupyterChannels } from './jupyter-channels';
import { JupyterAuthGuard } from './jupyter-auth.guard';
import { JupyterKernels } from './jupyter-kernels';
import { JupyterShell } from './jupyter-shell';
import { JupyterController } from './jupyter.controller';

/** The Jupyter protocol of each session (Kernel Gateway REST and the kernels' WebSockets), over the engine's actions. */
@Module({
  imports: [ActionsModule, SessionsModule, EventsModule],
  controllers: [JupyterController],
  providers: [JupyterAuthGuard, JupyterKernels, JupyterCells, JupyterShell, JupyterChannels],
})
export class JupyterApiModule {}
