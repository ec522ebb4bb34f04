/** Whitespace runs folded into single spaces: one log-friendly line. */
export const oneLine = (s: string): string => s.replace(/\s+/g, ' ').trim();
