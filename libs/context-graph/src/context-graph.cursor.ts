import { InvalidInputError } from '@switchyard/common';

// Shared by every adapter so a cursor means the same thing whatever the store: "after this seq".
const PREFIX = 'seq:';

export function encodeSeqCursor(seq: number): string {
  return Buffer.from(`${PREFIX}${seq}`).toString('base64url');
}

/** Returns the seq the next page starts after; throws `InvalidInputError` (field `cursor`) otherwise. */
export function decodeSeqCursor(cursor: string): number {
  const match = /^seq:(\d{1,15})$/.exec(Buffer.from(cursor, 'base64url').toString('utf8'));
  // Node's base64url decoder skips junk characters, so only a canonical round trip proves the cursor is ours.
  if (!match || encodeSeqCursor(Number(match[1])) !== cursor) {
    throw new InvalidInputError('cursor', 'cursor is not one returned by a previous page', 'INVALID_CURSOR');
  }
  return Number(match[1]);
}

/** Page size must be a positive integer; the HTTP layer caps it. */
export function assertLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new InvalidInputError('limit', 'limit must be a positive integer', 'INVALID_LIMIT', { limit });
  }
}
