import { InvalidInputError } from '@switchyard/common';

// Shared by every adapter so a cursor means the same thing whatever the store: "after this seq", written as a
// plain decimal so the HTTP document can describe every valid cursor with one pattern. Leading zeros are refused
// so each seq has one spelling; 15 digits keep it below Number.MAX_SAFE_INTEGER.
export const SEQ_CURSOR_PATTERN = '^(0|[1-9][0-9]{0,14})$';
const SEQ_CURSOR = new RegExp(SEQ_CURSOR_PATTERN);

export function encodeSeqCursor(seq: number): string {
  return String(seq);
}

/**
 * Returns the seq the next page starts after (a seq past the last action gives an empty page); throws
 * `InvalidInputError` (field `cursor`) for anything but a decimal matching `SEQ_CURSOR_PATTERN`.
 */
export function decodeSeqCursor(cursor: string): number {
  if (!SEQ_CURSOR.test(cursor)) {
    throw new InvalidInputError(
      'cursor',
      'cursor must be the nextCursor of a previous page: a decimal seq without leading zeros',
      'INVALID_CURSOR',
    );
  }
  return Number(cursor);
}

/** Page size must be a positive integer; the HTTP layer caps it. */
export function assertLimit(limit: number): void {
  if (!Number.isInteger(limit) || limit < 1) {
    throw new InvalidInputError('limit', 'limit must be a positive integer', 'INVALID_LIMIT', { limit });
  }
}
