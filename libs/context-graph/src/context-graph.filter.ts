import { ACTION_STATUSES, ACTION_TYPES, InvalidInputError } from '@switchyard/common';
import { assertLimit } from './context-graph.cursor';
import type { ActionRecord, GraphFilter } from './context-graph.types';
import { compact } from './context-graph.views';

// The `sessionGraph` filter, checked and normalised once for every store, so they refuse the same filters and
// compare the same values.

/** A filter checked and normalised (`since` as `toISOString()`, so stores compare it as text). */
export interface CheckedGraphFilter {
  since?: string;
  types?: string[];
  status?: string[];
  limit?: number;
}

// A date, or a date-time as ISO 8601 and RFC 3339 write it (`t`/`z` in either case, a leap second's `:60`).
const ISO_INSTANT = /^\d{4}-\d{2}-\d{2}([Tt]\d{2}:\d{2}(:\d{2}(\.\d{1,9})?)?([Zz]|[+-]\d{2}:\d{2})?)?$/;

/** Milliseconds of an ISO instant; NaN when it is none. A leap second counts as the one before it. */
function instantMs(text: string): number {
  if (!ISO_INSTANT.test(text)) return NaN;
  return Date.parse(text.replace(/^(\d{4}-\d{2}-\d{2}[Tt]\d{2}:\d{2}):60/, '$1:59'));
}

/** Validates a `GraphFilter`; `undefined` when it filters nothing. */
export function checkGraphFilter(filter: GraphFilter | undefined): CheckedGraphFilter | undefined {
  if (!filter) return undefined;
  const out: CheckedGraphFilter = {};
  if (filter.since !== undefined) {
    const ms = instantMs(filter.since);
    if (Number.isNaN(ms)) {
      throw new InvalidInputError('since', 'since must be an ISO 8601 date-time', 'INVALID_SINCE', {
        since: filter.since,
      });
    }
    out.since = new Date(ms).toISOString();
  }
  const members = (
    field: 'types' | 'status',
    values: readonly string[] | undefined,
    allowed: readonly string[],
  ) => {
    if (values === undefined) return undefined;
    const bad = values.filter((v) => !allowed.includes(v));
    if (bad.length > 0 || values.length === 0) {
      throw new InvalidInputError(
        field,
        `${field} must be a non-empty list of: ${allowed.join(', ')}`,
        'INVALID_FILTER',
        {
          [field]: values,
        },
      );
    }
    return [...new Set(values)];
  };
  out.types = members('types', filter.types, ACTION_TYPES);
  out.status = members('status', filter.status, ACTION_STATUSES);
  if (filter.limit !== undefined) {
    assertLimit(filter.limit);
    out.limit = filter.limit;
  }
  return compact(out);
}

/** Whether an action passes a checked filter's predicates (`limit` is applied by the caller). */
export function matchesFilter(a: ActionRecord, f: CheckedGraphFilter): boolean {
  return (
    (f.since === undefined || a.startedAt >= f.since) &&
    (f.types === undefined || f.types.includes(a.type)) &&
    (f.status === undefined || f.status.includes(a.status))
  );
}
