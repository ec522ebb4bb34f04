import { IsOptional, Matches } from 'class-validator';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError } from './config-error';
import { IntVar } from './env-parsing';

const VARIABLE = 'SWITCHYARD_SKILLS_DIR';

/** Skills: tools made of other tools, from a directory of the engine's and per tenant over the API. */
export class SkillsEnv {
  /**
   * Directory of the engine's skills, one sub-directory per skill (`skill.json` and `main.py` or `main.js`), offered
   * to every tenant (`examples/skills` holds two); read at start-up. Unset: no engine skills (tenants may still add theirs).
   */
  @IsOptional()
  @Matches(/^[^\0]+$/, { message: 'must be a directory path' })
  SWITCHYARD_SKILLS_DIR?: string = undefined;

  /** How deep calls may nest (a skill calling a skill calling a tool is 2 deep); deeper calls are `denied` (`CALL_DEPTH`). */
  @IntVar(1, 100)
  SWITCHYARD_SKILL_MAX_DEPTH = 10;

  /** Skills a tenant may add with POST /v1/skills; one more is refused with 409 (`SKILL_LIMIT`). */
  @IntVar(0, 10_000)
  SWITCHYARD_MAX_TENANT_SKILLS = 100;
}

export interface SkillsConfig {
  /** The engine's skills directory; `undefined` when there is none. */
  dir?: string;
  maxDepth: number;
  maxTenantSkills: number;
}

export function skillsConfig(env: SkillsEnv, cwd: string): SkillsConfig {
  const base = {
    maxDepth: env.SWITCHYARD_SKILL_MAX_DEPTH,
    maxTenantSkills: env.SWITCHYARD_MAX_TENANT_SKILLS,
  };
  if (env.SWITCHYARD_SKILLS_DIR === undefined) return base;
  const dir = path.resolve(cwd, env.SWITCHYARD_SKILLS_DIR);
  try {
    if (!fs.statSync(dir).isDirectory()) throw new Error('not a directory');
  } catch (err) {
    throw new ConfigError([{ variable: VARIABLE, message: `${dir}: ${(err as Error).message}` }]);
  }
  // Its skills are read and checked at boot by the skills module (engine/skills/engine-skills.ts).
  return { ...base, dir };
}
