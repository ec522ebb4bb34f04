import { plainToInstance, Transform } from 'class-transformer';
import {
  IsBoolean,
  IsInt,
  IsNumber,
  IsOptional,
  IsString,
  Matches,
  Max,
  Min,
  validateSync,
} from 'class-validator';
import type { ConfigProblem } from './config-error';

/** Decorators and parsing shared by the env schema's sections (`*-env.ts`). */

export const MiB = 1024 * 1024;

const toInt = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value.trim()) : value;
const toBool = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  return value;
};
const toDecimal = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^\d+(\.\d+)?$/.test(value.trim()) ? Number(value.trim()) : value;
const toList = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string'
    ? value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0)
    : value;

/**
 * The decorators as if written one above the other: applied bottom first, as TypeScript applies a stack, so a
 * bad value's messages keep the order they had when each variable spelled its stack out.
 */
function stack(...decorators: PropertyDecorator[]): PropertyDecorator {
  return (target, key) => {
    for (const decorate of [...decorators].reverse()) decorate(target, key);
  };
}

/** An optional integer variable from `min` to `max`. */
export const IntVar = (min: number, max?: number): PropertyDecorator =>
  stack(IsOptional(), Transform(toInt), IsInt(), Min(min), ...(max === undefined ? [] : [Max(max)]));

/** An optional decimal variable from `min` to `max` (`0.5`). */
export const DecimalVar = (min: number, max: number): PropertyDecorator =>
  stack(IsOptional(), Transform(toDecimal), IsNumber(), Min(min), Max(max));

/** An optional flag: 1/true/yes/on or 0/false/no/off/empty. */
export const BoolVar = (): PropertyDecorator => stack(IsOptional(), Transform(toBool), IsBoolean());

/** An optional comma-separated list; blanks around and between entries are dropped. */
export const ListVar = (): PropertyDecorator =>
  stack(IsOptional(), Transform(toList), IsString({ each: true }));

/** An optional absolute path. */
export const AbsolutePathVar = (): PropertyDecorator =>
  stack(IsOptional(), Matches(/^\/[^\0]*$/, { message: 'must be an absolute path' }));

/**
 * Reads the variables one schema class declares (its initialised properties) from `env`, and validates them.
 * Returns the parsed instance, or the problems naming each bad variable.
 */
export function parseEnvSection<T extends object>(
  schema: new () => T,
  env: NodeJS.ProcessEnv,
): { parsed: T; problems: ConfigProblem[] } {
  const raw: Record<string, string> = {};
  for (const key of Object.keys(new schema())) {
    const value = env[key];
    if (value !== undefined) raw[key] = value;
  }
  const parsed = plainToInstance(schema, raw);
  const problems = validateSync(parsed, { forbidUnknownValues: true }).map((e) => ({
    variable: e.property,
    message: `${Object.values(e.constraints ?? {}).join('; ')} (got ${JSON.stringify(e.value)})`,
  }));
  return { parsed, problems };
}
