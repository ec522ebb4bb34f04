/**
 * How the HTTP edge should treat a domain error. Libraries never speak HTTP; they say what kind of
 * failure happened and `apps/engine` maps the kind to a status code in one filter.
 */
export type ErrorKind =
  | 'invalid_input'
  | 'not_found'
  /** Authenticated, but not allowed to do this (an admin-only operation, an approval by a non-approver). */
  | 'forbidden'
  | 'conflict'
  /** Well-formed, but cannot be processed as sent (an idempotency key reused with another body). */
  | 'unprocessable'
  | 'payload_too_large'
  /** Too much work queued: retry after `details.retryAfterSeconds`. */
  | 'rate_limited'
  | 'unavailable'
  /** The engine stands between the caller and a server in a sandbox, and that server is not there (nothing listens). */
  | 'bad_gateway'
  | 'internal';

/** Base of every error a Switchyard library throws on purpose. */
export abstract class SwitchyardError extends Error {
  /** Stable machine-readable code, e.g. `PATH_ESCAPE`. */
  abstract readonly code: string;
  abstract readonly kind: ErrorKind;
  /** True when the same call may succeed if simply tried again. */
  readonly retriable: boolean = false;

  constructor(
    message: string,
    /** Structured detail for the caller, e.g. `{ field: 'path', path: '../x' }`. */
    readonly details: Record<string, unknown> = {},
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = new.target.name;
  }
}

/** A request field failed validation. `field` uses dotted paths (`env.LD_PRELOAD`). */
export class InvalidInputError extends SwitchyardError {
  readonly code: string;
  readonly kind = 'invalid_input' as const;

  constructor(field: string, message: string, code = 'INVALID_INPUT', details: Record<string, unknown> = {}) {
    super(message, { field, ...details });
    this.code = code;
  }

  get field(): string {
    return this.details.field as string;
  }
}

/** The caller may not do this; the message says who may. */
export class ForbiddenError extends SwitchyardError {
  readonly code: string;
  readonly kind = 'forbidden' as const;

  constructor(message: string, code = 'FORBIDDEN', details: Record<string, unknown> = {}) {
    super(message, details);
    this.code = code;
  }
}

export class NotFoundError extends SwitchyardError {
  readonly code = 'NOT_FOUND';
  readonly kind = 'not_found' as const;
}
