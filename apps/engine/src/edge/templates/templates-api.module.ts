import { Module } from '@nestjs/common';
import { TemplatesModule } from '../../session/templates/templates.module';
import { TemplatesController } from './templates.controller';

/** The REST endpoints of Templates, over the module that does the work. */
@Module({
  imports: [TemplatesModule],
  controllers: [TemplatesController],
})
export class TemplatesApiModule {}
