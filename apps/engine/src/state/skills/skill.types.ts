/** What a skill is, as it is stored and checked: the one shape every layer passes around. */

export const SKILL_NAME = /^[a-z][a-z0-9_-]{0,62}$/;

export const SKILL_LANGUAGES = ['python', 'node'] as const;
export type SkillLanguage = (typeof SKILL_LANGUAGES)[number];

/** A skill's body file per language. */
export const SKILL_BODY: Record<SkillLanguage, string> = { python: 'main.py', node: 'main.js' };

/**
 * A skill: a tool made of other tools. Its body (`main(input, ctx)` in python or node) runs in a sandbox like any code
 * action and calls tools and skills with `ctx.call(name, input)`; its input is checked against `inputSchema` before
 * it runs and what it returns against `outputSchema` after.
 */
export interface SkillDefinition {
  name: string;
  description: string;
  inputSchema: Record<string, unknown>;
  outputSchema: Record<string, unknown>;
  language: SkillLanguage;
  code: string;
  /** The body's time limit; the engine default when absent. */
  timeoutMs?: number;
}

/** A skill as the engine holds it: where it comes from (the engine's directory, or a tenant's POST). */
export interface SkillRecord extends SkillDefinition {
  source: 'engine' | 'tenant';
  /** When a tenant added it. */
  createdAt?: string;
}
