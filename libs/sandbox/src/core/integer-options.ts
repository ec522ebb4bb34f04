import { SandboxConfigError } from './sandbox.errors';

/** An integer option: its name (as `SandboxConfigError` names it), value and range (`max` unbounded when omitted). @internal */
export type IntegerOption = [name: string, value: number, min: number, max?: number];

/**
 * The range an option of the library accepts (`max` unbounded when omitted), exported so that whoever sets the option
 * from elsewhere (the engine's env schema) refers to it instead of repeating it.
 */
export interface Bounds {
  readonly min: number;
  readonly max?: number;
}

/**
 * Fails on the first option that is not a safe integer within its range, naming it (`prefix` + name) and the range.
 * The one integer check of every option resolver of the sandbox library.
 *
 * @internal
 */
export function checkIntegers(options: readonly IntegerOption[], prefix = ''): void {
  for (const [name, value, min, max] of options) {
    if (Number.isSafeInteger(value) && value >= min && (max === undefined || value <= max)) continue;
    const range =
      max !== undefined
        ? `an integer from ${min} to ${max}`
        : min === 0
          ? 'a non-negative integer'
          : min === 1
            ? 'a positive integer'
            : `an integer of at least ${min}`;
    throw new SandboxConfigError(`${prefix}${name}`, `must be ${range}, got ${String(value)}`);
  }
}
