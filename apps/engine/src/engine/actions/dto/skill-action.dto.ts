import { Equals, IsObject, IsOptional, Matches } from 'class-validator';
import { JSONSchema } from 'class-validator-jsonschema';
import { SKILL_NAME } from '../../../state/skills/skill.types';

/** A skill's name: what `GET /v1/skills` lists and tools and `ctx.call` use. */

@JSONSchema({
  description:
    'Call a skill (a tool made of other tools, GET /v1/skills) with its input: the input is checked against the ' +
    "skill's input schema first (400 naming the path), its body runs in a sandbox picked by risk and calls other " +
    'tools with ctx.call, each its own action linked by CALLED_BY; its output is checked against the output schema.',
})
export class SkillActionDto {
  @Equals('skill')
  type!: 'skill';

  @Matches(SKILL_NAME, { message: 'name must be a skill name (lowercase letters, digits, - and _)' })
  @JSONSchema({ description: 'The skill, as GET /v1/skills names it', pattern: SKILL_NAME.source })
  name!: string;

  @IsOptional()
  @IsObject()
  @JSONSchema({
    description: "The skill's input, as its input schema says (default {})",
    additionalProperties: true,
  })
  input?: Record<string, unknown>;
}
