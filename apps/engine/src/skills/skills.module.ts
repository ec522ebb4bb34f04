import { Module } from '@nestjs/common';
import { stateStore } from '../storage/storage.module';
import { PostgresTenantSkillStore } from './postgres-tenant-skill.store';
import { SkillRegistry } from './skill-registry';
import { SkillsController } from './skills.controller';
import { SqliteTenantSkillStore } from './sqlite-tenant-skill.store';
import { TenantSkillStore } from './tenant-skill.store';

/** Skills: the engine's and tenants', over REST; the skill action handler runs them. */
@Module({
  controllers: [SkillsController],
  providers: [
    stateStore(TenantSkillStore, { sqlite: SqliteTenantSkillStore, postgres: PostgresTenantSkillStore }),
    SkillRegistry,
  ],
  exports: [SkillRegistry],
})
export class SkillsModule {}
