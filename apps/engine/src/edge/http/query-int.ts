/** `@Transform` for integer query parameters: `"25"` becomes 25; anything else is left for the validators to refuse. */
export const toInt = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^\d+$/.test(value) ? Number(value) : value;
