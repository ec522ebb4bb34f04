import { ConfigError, loadEngineConfig } from './platform/config/engine-config';
import { readEnginePolicy } from './gates/policies/engine-policy';
import { readEngineHooks } from './gates/hooks/engine-hooks';
import { readEngineSkills } from './engine/skills/engine-skills';
import { checkTemplateFiles } from './session/templates/template-files';

/** What start-up does with the settings: the configuration, then the files the modules read at boot. */
export function boot(env: Record<string, string>, cwd: string) {
  const config = loadEngineConfig(env, cwd);
  return {
    config,
    policy: readEnginePolicy(config.policy.file),
    hooks: readEngineHooks(config.hooks.file),
    skills: readEngineSkills(config.skills.dir),
    templates: checkTemplateFiles(config.templates.dir),
  };
}

/** The `variable: message` of every problem start-up would stop on (none: `[]`). */
export function bootProblems(env: Record<string, string>, cwd: string): string[] {
  try {
    boot(env, cwd);
  } catch (err) {
    if (err instanceof ConfigError) return err.problems.map((p) => `${p.variable}: ${p.message}`);
    throw err;
  }
  return [];
}
