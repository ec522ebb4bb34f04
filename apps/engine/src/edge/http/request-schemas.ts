import type { ReferenceObject, SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_DTO_CLASSES } from '../../engine/actions/dto/action-body';

type Schema = SchemaObject | ReferenceObject;

const ref = (name: string): ReferenceObject => ({ $ref: `#/components/schemas/${name}` });

/** Properties that hold a whole action body, as `POST …/actions` takes it. */
const ACTION_PROPERTIES: Record<string, string> = { PlanStepDto: 'action', RetryActionDto: 'action' };

/** Text without a NUL character. */
const NO_NUL = '^[^\\u0000]*$';

/** Fields the engine refuses with a NUL in them, by schema. */
const NUL_FREE: Record<string, string[]> = { CodeActionDto: ['code'] };

/** `null`, and only `null` (OpenAPI 3.0's way to say so; `type` is required beside `nullable`). */
const NULL_ONLY: SchemaObject = { type: 'string', nullable: true, enum: [null] };

/**
 * A reference with words beside it (`description`, and the `type: object` class-validator writes) as OpenAPI means
 * it: a `$ref` takes no siblings, so the reference goes in `allOf` and the words stay outside.
 */
function withoutRefSiblings(schema: Schema): Schema {
  if (!('$ref' in schema)) return schema;
  const { $ref, ...siblings } = schema as ReferenceObject & SchemaObject;
  delete siblings.type;
  return Object.keys(siblings).length === 0 ? { $ref } : { allOf: [{ $ref }], ...siblings };
}

/** An optional field may be sent as `null`: the engine takes it as absent. */
function nullable(schema: Schema): Schema {
  if (!('$ref' in schema) && schema.allOf?.length === 1 && '$ref' in schema.allOf[0]) {
    // A reference with words: null beside the reference, the words on the whole.
    const { allOf, ...words } = schema;
    return { anyOf: [allOf[0], NULL_ONLY], ...words };
  }
  if ('$ref' in schema || schema.oneOf || schema.anyOf || schema.allOf || schema.type === undefined) {
    return { anyOf: [schema, NULL_ONLY] };
  }
  // With `enum`, `nullable` alone does not admit null: it must be one of the values too.
  const values = schema.enum as unknown[] | undefined;
  return { ...schema, nullable: true, ...(values && { enum: [...values, null] }) };
}

/**
 * Makes the request schemas (class-validator's, converted) say what validation really does, so that tools that
 * generate requests from the document (Schemathesis) and clients agree with the engine: unknown fields are refused
 * (`additionalProperties: false`, even as `null`), an optional field may be `null` (taken as absent), a plan step's or retry's
 * `action` is one of the action bodies, and what this engine's settings allow (`EngineLimits`) is stated.
 */
/** What of a request's validity depends on this engine's settings, stated in its document. */
export interface EngineLimits {
  /** Templates this engine has (valid files), when it started. */
  templates: string[];
  /** SWITCHYARD_MAX_SESSION_TTL_SECONDS. */
  maxTtlSeconds: number;
  /** SWITCHYARD_EGRESS_ALLOWED is empty: a session may ask for no host at all. */
  noEgress: boolean;
  /** SWITCHYARD_MAX_TIMEOUT_MS: the longest `timeoutMs` of a code action. */
  maxTimeoutMs: number;
}

/** `CreateSessionDto` as this engine takes it: its templates, its TTL cap, and no hosts when it allows none. */
function describeSessionCreation(properties: Record<string, Schema>, limits: EngineLimits): void {
  if (properties.template) {
    if (limits.templates.length > 0) {
      properties.template = { ...(properties.template as SchemaObject), enum: limits.templates };
    } else delete properties.template;
  }
  if (properties.ttlSeconds) {
    properties.ttlSeconds = { ...(properties.ttlSeconds as SchemaObject), maximum: limits.maxTtlSeconds };
  }
}

export function describeRequestSchemas(
  schemas: Record<string, Schema>,
  limits: EngineLimits,
): Record<string, Schema> {
  const out: Record<string, Schema> = { ...schemas };
  for (const [name, schema] of Object.entries(schemas)) {
    if (!name.endsWith('Dto') || '$ref' in schema || schema.type !== 'object') continue;
    const properties: Record<string, Schema> = { ...(schema.properties ?? {}) };
    const action = ACTION_PROPERTIES[name];
    if (action && properties[action]) {
      properties[action] = {
        ...(properties[action] as SchemaObject),
        oneOf: ACTION_DTO_CLASSES.map((cls) => ref(cls.name)),
      };
    }
    if (name === 'CreateSessionDto') describeSessionCreation(properties, limits);
    // Code and commands reach interpreters as C strings: a NUL is refused (the tool catalog says it in words).
    for (const field of NUL_FREE[name] ?? []) {
      if (properties[field]) properties[field] = { ...(properties[field] as SchemaObject), pattern: NO_NUL };
    }
    if (name === 'CodeActionDto' && properties.timeoutMs) {
      properties.timeoutMs = { ...(properties.timeoutMs as SchemaObject), maximum: limits.maxTimeoutMs };
    }
    if (name === 'NetworkPolicyDto' && limits.noEgress && properties.allow) {
      properties.allow = { ...(properties.allow as SchemaObject), maxItems: 0 };
    }
    const required = new Set(schema.required ?? []);
    for (const [key, property] of Object.entries(properties)) {
      const plain = withoutRefSiblings(property);
      properties[key] = required.has(key) ? plain : nullable(plain);
    }
    out[name] = { additionalProperties: false, ...schema, properties };
  }
  return out;
}
