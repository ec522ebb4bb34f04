import { InvalidInputError } from '@switchyard/common';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { readSkill, SkillNameTakenError } from './skill-definition';
import { SKILL_BODY, SKILL_LANGUAGES, type SkillDefinition } from '../../state/skills/skill.types';

/** A skill directory that cannot be used: which one, and why. */
export class SkillDirectoryError extends Error {
  override readonly name = 'SkillDirectoryError';
}

/**
 * Reads every skill of a directory: one sub-directory per skill, holding `skill.json` (name, description,
 * inputSchema, outputSchema, optional timeoutMs) and exactly one body, `main.py` or `main.js`. The sub-directory's
 * name must be the skill's. Throws `SkillDirectoryError` naming the first one at fault.
 */
export function readSkillDirectory(dir: string, reserved: ReadonlySet<string>): SkillDefinition[] {
  const skills: SkillDefinition[] = [];
  for (const entry of fs
    .readdirSync(dir, { withFileTypes: true })
    .sort((a, b) => a.name.localeCompare(b.name))) {
    if (!entry.isDirectory() || entry.name.startsWith('.')) continue;
    const at = path.join(dir, entry.name);
    const fail = (why: string): never => {
      throw new SkillDirectoryError(`skill ${at}: ${why}`);
    };
    let manifest: unknown;
    try {
      manifest = JSON.parse(fs.readFileSync(path.join(at, 'skill.json'), 'utf8'));
    } catch (err) {
      fail(`skill.json: ${(err as Error).message}`);
    }
    const bodies = SKILL_LANGUAGES.filter((l) => fs.existsSync(path.join(at, SKILL_BODY[l])));
    if (bodies.length !== 1) fail('needs exactly one body: main.py or main.js');
    const language = bodies[0];
    const manifestFields = typeof manifest === 'object' && manifest !== null ? manifest : {};
    if ('code' in manifestFields || 'language' in manifestFields)
      fail('skill.json holds neither code nor language: the body file says them');
    try {
      const skill = readSkill(
        { ...manifestFields, language, code: fs.readFileSync(path.join(at, SKILL_BODY[language]), 'utf8') },
        reserved,
      );
      if (skill.name !== entry.name) fail(`its directory must be named after the skill (${skill.name})`);
      skills.push(skill);
    } catch (err) {
      if (err instanceof InvalidInputError) fail(`${err.field}: ${err.message}`);
      if (err instanceof SkillNameTakenError) fail(err.message);
      throw err;
    }
  }
  return skills;
}
