import { Inject, Injectable } from '@nestjs/common';
import { CLOCK, type Clock, ForbiddenError, SwitchyardError } from '@switchyard/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { buildToolCatalog } from '../tools/tool-catalog';
import { readSkill } from './skill-definition';
import { ENGINE_SKILLS } from './engine-skills';
import type { SkillDefinition, SkillRecord } from '../../state/skills/skill.types';
import { TenantSkillStore } from '../../state/skills/tenant-skill.store';

/** No skill of that name for the tenant: the request names something that does not exist (404, field `name`). */
export class UnknownSkillError extends SwitchyardError {
  readonly code = 'UNKNOWN_SKILL';
  readonly kind = 'not_found' as const;

  constructor(name: string) {
    super(`no skill ${name} (GET /v1/skills lists them)`, { field: 'name', name });
  }
}

/** A tenant's skill of that name exists already (delete it first). */
export class SkillExistsError extends SwitchyardError {
  readonly code = 'SKILL_EXISTS';
  readonly kind = 'conflict' as const;
}

/** A tenant has as many skills as SWITCHYARD_MAX_TENANT_SKILLS allows. */
export class SkillLimitError extends SwitchyardError {
  readonly code = 'SKILL_LIMIT';
  readonly kind = 'conflict' as const;
}

/**
 * Every skill the engine offers: its own (SWITCHYARD_SKILLS_DIR, read at boot, offered to every tenant) and each
 * tenant's (POST /v1/skills, kept in the state store, offered to that tenant only). A tenant's skill never takes the name
 * of a built-in tool or of an engine skill.
 */
@Injectable()
export class SkillRegistry {
  private readonly engine: Map<string, SkillRecord>;
  private readonly builtIn = new Set(buildToolCatalog().map((t) => t.name));

  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly tenants: TenantSkillStore,
    @Inject(ENGINE_SKILLS) engineSkills: SkillDefinition[],
  ) {
    this.engine = new Map(engineSkills.map((s) => [s.name, { ...s, source: 'engine' as const }]));
  }

  /** The engine's skills, then the tenant's, each by name. */
  list(tenant: string): SkillRecord[] {
    const own = this.tenants.list(tenant);
    return [...[...this.engine.values()].sort((a, b) => a.name.localeCompare(b.name)), ...own];
  }

  find(tenant: string, name: string): SkillRecord | undefined {
    const engine = this.engine.get(name);
    if (engine) return engine;
    return this.tenants.find(tenant, name);
  }

  /** Adds a tenant's skill (400 naming the field at fault, 409 when the name is taken or the tenant is at its cap). */
  async add(tenant: string, body: unknown): Promise<SkillRecord> {
    const skill = readSkill(body, this.builtIn);
    if (this.engine.has(skill.name)) {
      throw new SkillExistsError(`${skill.name} is one of the engine's skills; pick another name`, {
        name: skill.name,
      });
    }
    const createdAt = this.clock.now().toISOString();
    const max = this.config.skills.maxTenantSkills;
    const added = await this.tenants.add(tenant, skill, createdAt, max);
    if (added === 'exists') {
      throw new SkillExistsError(
        `you already have a skill ${skill.name}; DELETE /v1/skills/${skill.name} first`,
        {
          name: skill.name,
        },
      );
    }
    if (added === 'limit') {
      throw new SkillLimitError(
        `a tenant may have ${max} skills (SWITCHYARD_MAX_TENANT_SKILLS); delete one first`,
      );
    }
    return { ...skill, source: 'tenant', createdAt };
  }

  /** Removes a tenant's own skill: 404 when it has none of that name, 403 for an engine skill. */
  async remove(tenant: string, name: string): Promise<void> {
    if (this.engine.has(name)) {
      throw new ForbiddenError(
        `${name} is one of the engine's skills (SWITCHYARD_SKILLS_DIR); it cannot be deleted here`,
      );
    }
    if (!(await this.tenants.remove(tenant, name))) throw new UnknownSkillError(name);
  }
}
