import { Module } from '@nestjs/common';
import { stateStore } from '../../state/storage/storage.module';
import { PostgresTenantSkillStore } from '../../state/skills/postgres-tenant-skill.store';
import { SkillRegistry } from './skill-registry';
import { engineSkillsProvider } from './engine-skills';
import { SqliteTenantSkillStore } from '../../state/skills/sqlite-tenant-skill.store';
import { TenantSkillStore } from '../../state/skills/tenant-skill.store';

/** Skills: the engine's and tenants', over REST; the skill action handler runs them. */
@Module({
  providers: [
    engineSkillsProvider,
    stateStore(TenantSkillStore, { sqlite: SqliteTenantSkillStore, postgres: PostgresTenantSkillStore }),
    SkillRegistry,
  ],
  exports: [SkillRegistry],
})
export class SkillsModule {}
