import { Module } from '@nestjs/common';
import { SkillRegistry } from './skill-registry';
import { SkillsController } from './skills.controller';

/** Skills: the engine's and tenants', over REST; the skill action handler runs them. */
@Module({
  controllers: [SkillsController],
  providers: [SkillRegistry],
  exports: [SkillRegistry],
})
export class SkillsModule {}
