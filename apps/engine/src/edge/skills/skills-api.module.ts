import { Module } from '@nestjs/common';
import { SkillsModule } from '../../engine/skills/skills.module';
import { SkillsController } from './skills.controller';

/** The REST endpoints of Skills, over the module that does the work. */
@Module({
  imports: [SkillsModule],
  controllers: [SkillsController],
})
export class SkillsApiModule {}
