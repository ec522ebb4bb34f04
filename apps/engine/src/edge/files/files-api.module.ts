import { Module } from '@nestjs/common';
import { ActionsModule } from '../../engine/actions/actions.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { FilesController } from './files.controller';

/** The REST endpoints of file transfer (files/content, files/archive), over the actions that record them. */
@Module({
  imports: [ActionsModule, SessionsModule],
  controllers: [FilesController],
})
export class FilesApiModule {}
