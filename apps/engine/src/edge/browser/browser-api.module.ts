import { Module } from '@nestjs/common';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { BrowserViewController } from './browser-view.controller';

/** The REST endpoint that shows a session's browser to a person watching (`…/browser/view`). */
@Module({
  imports: [SessionsModule],
  controllers: [BrowserViewController],
})
export class BrowserApiModule {}
