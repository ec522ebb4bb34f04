import { InvalidInputError } from '@switchyard/common';

/** The most results (entries, paths, matches) one list, find or grep may ask for. */
export const MAX_RESULT_LIMIT = 10_000;

/** An optional integer option of a file op: `def` when left out, refused outside `min`..`max`. */
export function intOption(value: unknown, field: string, def: number, min: number, max: number): number {
  if (value === undefined) return def;
  if (typeof value !== 'number' || !Number.isInteger(value) || value < min || value > max) {
    throw new InvalidInputError(field, `${field} must be an integer from ${min} to ${max}`);
  }
  return value;
}
