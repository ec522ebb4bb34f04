import type { SkillRecord } from '../../state/skills/skill.types';
import type { JsonSchema, ToolDefinition } from './tool-catalog';

/**
 * A skill as a tool: its name and description, its input schema as it wrote it; calling it is a `skill` action with
 * the input as given (the skill's own schema checks it, so the tool call reads no field list of its own).
 */
export function skillTool(skill: SkillRecord): ToolDefinition {
  const schema = skill.inputSchema as unknown as JsonSchema;
  return {
    name: skill.name,
    description: skill.description,
    inputSchema: schema,
    kind: 'skill',
    fields: Object.keys((skill.inputSchema.properties as Record<string, unknown> | undefined) ?? {}),
    openInput: true,
    language: skill.language,
    toAction: (input) => ({ type: 'skill', name: skill.name, input }),
    renames: {},
  };
}
