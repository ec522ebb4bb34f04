import type { SkillRegistry } from './skill-registry';
import type { SkillRecord } from '../../state/skills/skill.types';

/** @internal Tests only: a registry holding exactly `skills` (every tenant's), without engine.db. */
export function skillsForTests(skills: SkillRecord[] = []): SkillRegistry {
  return {
    list: () => skills,
    find: (_tenant: string, name: string) => skills.find((s) => s.name === name),
  } as unknown as SkillRegistry;
}
