import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ERROR_CLASSES, RISK_LEVELS, TIERS } from '@switchyard/common';

/**
 * Pieces the response schemas of several domains share. Each domain's schemas sit beside its controller
 * (`*.schemas.ts`) and import from here; response-schemas.ts merges them into the one registry. Nothing here imports
 * a domain file, so the registry and the domains never import each other in a circle.
 */

/** A property or a schema: inline, or a reference to another registered schema. */
export type SchemaOrRef = SchemaObject | { $ref: string };

/** `$ref` to a registered schema, by name. */
export const ref = (name: string): { $ref: string } => ({ $ref: `#/components/schemas/${name}` });

/**
 * `schema` that may also be `null` (OpenAPI 3.0 has no `type: "null"`; a `$ref` cannot carry `nullable`). A nullable
 * property stays out of `required`, even one the code always sends: datamodel-code-generator (without
 * `--strict-nullable`) reads `nullable` only on optional properties, and would refuse the null of a required one.
 * apps/engine/src/edge/http/openapi-generators.spec.ts holds the document to it.
 */
export const nullable = (schema: SchemaObject): SchemaObject => ({ ...schema, nullable: true });

export const TIMESTAMP: SchemaObject = { type: 'string', format: 'date-time' };

/** Where an action ran (`ActionTier`). */
export const ACTION_TIER: SchemaObject = {
  type: 'string',
  enum: [...TIERS, 'engine', 'browser', 'none'],
  description: 'Where it ran: a sandbox tier, the engine (file ops), the browser, or none (refused first)',
};

/** A flag the engine sends only when set: `true`, or absent. */
export const ONLY_TRUE = (description: string): SchemaObject => ({
  type: 'boolean',
  enum: [true],
  description,
});

/** An object of named properties, `required` listing those the code always sends. */
export const object = (
  required: string[],
  properties: Record<string, SchemaOrRef>,
  description?: string,
): SchemaObject => ({
  type: 'object',
  ...(description !== undefined && { description }),
  ...(required.length > 0 && { required }),
  properties,
});

/** A free-form JSON object. */
export const FREE_OBJECT = (description: string): SchemaObject => ({
  type: 'object',
  additionalProperties: true,
  description,
});

export const ACTION_ERROR_SCHEMA: SchemaObject = object(
  ['class', 'message'],
  {
    class: { type: 'string', enum: [...ERROR_CLASSES] },
    code: { type: 'string', description: 'Machine code, e.g. `ENOENT`, `OUT_OF_MEMORY`, `RISK_CRITICAL`' },
    message: { type: 'string' },
  },
  'Why the engine (not the user code) failed the action',
);

export const RISK_SCHEMA: SchemaObject = object(['score', 'level', 'reasons'], {
  score: { type: 'number' },
  level: { type: 'string', enum: [...RISK_LEVELS] },
  reasons: { type: 'array', items: { type: 'string' } },
});

export const RESTORED_SCHEMA: SchemaObject = object(
  ['checkpointId', 'copied', 'removed', 'kept', 'bytesCopied'],
  {
    checkpointId: { type: 'string' },
    copied: { type: 'integer', description: 'Entries written back' },
    removed: { type: 'integer', description: 'Entries removed' },
    kept: { type: 'integer', description: 'Entries already as they were' },
    bytesCopied: { type: 'integer', description: '0 when every file came back as a copy-on-write reflink' },
  },
  'A restore of the workspace to a checkpoint: before an action ran (a retry with `restore: true`), or asked for ' +
    'directly',
);

/** The schemas of this file, by the name the others refer to. */
export const COMMON_SCHEMAS = {
  ActionError: ACTION_ERROR_SCHEMA,
  RiskAssessment: RISK_SCHEMA,
  RestoredCheckpoint: RESTORED_SCHEMA,
} satisfies Record<string, SchemaObject>;
