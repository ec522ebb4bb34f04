import { ConfigError } from '../../platform/config/config-error';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { SkillDefinition } from '../../state/skills/skill.types';
import { buildToolCatalog } from '../tools/tool-catalog';
import { readSkillDirectory, SkillDirectoryError } from './skill-directory';

/**
 * Reads the engine's skills directory once at boot (its existence is checked with the configuration): a skill that
 * cannot be used stops start-up naming the variable. A skill may not take a built-in tool's name.
 */
export function readEngineSkills(dir: string | undefined): SkillDefinition[] {
  if (dir === undefined) return [];
  try {
    return readSkillDirectory(dir, new Set(buildToolCatalog().map((t) => t.name)));
  } catch (err) {
    if (err instanceof SkillDirectoryError)
      throw new ConfigError([{ variable: 'SWITCHYARD_SKILLS_DIR', message: err.message }]);
    throw err;
  }
}

/** Injection token of the engine's skills (`SkillDefinition[]`, from SWITCHYARD_SKILLS_DIR). */
export const ENGINE_SKILLS = Symbol('ENGINE_SKILLS');

export const engineSkillsProvider = {
  provide: ENGINE_SKILLS,
  useFactory: (config: EngineConfig): SkillDefinition[] => readEngineSkills(config.skills.dir),
  inject: [ENGINE_CONFIG],
};
