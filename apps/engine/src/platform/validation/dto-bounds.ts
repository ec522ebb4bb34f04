import type { ClassConstructor } from 'class-transformer';
import type { MetadataStorage } from 'class-transformer/types/MetadataStorage';
import { getMetadataStorage } from 'class-validator';
import type { FieldProblem } from './request-validation.error';

// class-transformer's `@Type()` registry is not exported from its index (see openapi.ts).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: MetadataStorage;
};

/**
 * More keys than any DTO has fields: such an object is refused as a whole, rather than validated into one "unknown
 * field" error per key (class-validator spends tens of microseconds on each).
 */
export const MAX_DTO_KEYS = 256;
/**
 * The most unknown fields reported for one body. Each costs class-validator tens of microseconds, and 200 plan steps
 * of 250 unknown keys each took it a second; past this many, the body is refused with these without validating it.
 */
export const MAX_UNKNOWN_FIELDS = 100;

const fieldOf = (prefix: string, property: string): string => (prefix ? `${prefix}.${property}` : property);

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

interface Bounds {
  /** The fields the class declares (those with a validation rule); any other is unknown. */
  declared: Set<string>;
  /** `@ArrayMaxSize` fields and their bound. */
  maxSizes: Array<[property: string, max: number]>;
  /** Fields holding nested DTOs (`@Type(() => PolicyDto)`), or arrays of them. */
  nested: Array<[property: string, type: (value: Record<string, unknown>) => unknown]>;
}

const boundsByClass = new WeakMap<ClassConstructor<object>, Bounds>();

/** A class's bounds, read from its decorators once. */
function boundsOf(cls: ClassConstructor<object>): Bounds {
  let bounds = boundsByClass.get(cls);
  if (bounds) return bounds;
  const metas = getMetadataStorage().getTargetValidationMetadatas(cls, '', true, false);
  bounds = {
    declared: new Set(metas.map((m) => m.propertyName)),
    maxSizes: metas
      .filter((m) => m.name === 'arrayMaxSize')
      .map((m): [string, number] => [m.propertyName, Number(m.constraints[0])]),
    nested: [],
  };
  for (const property of bounds.declared) {
    const type = defaultMetadataStorage.findTypeMetadata(cls, property);
    if (type?.typeFunction) {
      bounds.nested.push([property, (object) => type.typeFunction({ newObject: {}, object, property })]);
    }
  }
  boundsByClass.set(cls, bounds);
  return bounds;
}

/**
 * The bounds class-validator checks last, checked first: an array over its `@ArrayMaxSize` and an object of more than
 * MAX_DTO_KEYS keys, in `value` and in the nested DTOs it holds. class-validator validates every element of an
 * array before it counts them (`steps` of 10 000 `{}` took 1.7 s), so without this a body's work would grow with
 * what the DTO refuses anyway. Unknown fields are reported here too once there are MAX_UNKNOWN_FIELDS of them.
 * Answers the problems found; the caller refuses the body with them.
 */
export function oversizeProblems(cls: ClassConstructor<object>, value: unknown, prefix = ''): FieldProblem[] {
  const unknown: FieldProblem[] = [];
  const problems = walk(cls, value, prefix, unknown);
  if (problems.length > 0) return problems;
  return unknown.length >= MAX_UNKNOWN_FIELDS ? unknown : [];
}

/** oversizeProblems of one DTO object; unknown fields are gathered in `unknown` (up to MAX_UNKNOWN_FIELDS). */
function walk(
  cls: ClassConstructor<object>,
  value: unknown,
  prefix: string,
  unknown: FieldProblem[],
): FieldProblem[] {
  if (!isObject(value) || unknown.length >= MAX_UNKNOWN_FIELDS) return [];
  const keys = Object.keys(value);
  if (keys.length > MAX_DTO_KEYS) {
    return [
      { field: prefix || 'body', message: `has ${keys.length} fields; at most ${MAX_DTO_KEYS} are read` },
    ];
  }
  const { declared, maxSizes, nested } = boundsOf(cls);
  const problems: FieldProblem[] = maxSizes
    .filter(
      ([property, max]) => Array.isArray(value[property]) && (value[property] as unknown[]).length > max,
    )
    .map(([property, max]) => ({
      field: fieldOf(prefix, property),
      message: `must contain no more than ${max} elements`,
    }));
  if (problems.length > 0) return problems;
  for (const key of keys) {
    if (declared.has(key)) continue;
    if (unknown.length >= MAX_UNKNOWN_FIELDS) return [];
    unknown.push({ field: fieldOf(prefix, key), message: 'unknown field' });
  }
  for (const [property, typeOf] of nested) {
    const type = typeOf(value) as ClassConstructor<object> | undefined;
    const field = value[property];
    if (typeof type !== 'function' || field === undefined) continue;
    const at = fieldOf(prefix, property);
    const items = Array.isArray(field) ? field : [field];
    for (let i = 0; i < items.length; i++) {
      problems.push(...walk(type, items[i], Array.isArray(field) ? `${at}[${i}]` : at, unknown));
    }
  }
  return problems;
}
