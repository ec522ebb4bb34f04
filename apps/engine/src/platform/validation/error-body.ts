/** A part of the request at fault: a body field (`steps[0].action.code`), a parameter or a header. */
export interface FieldError {
  path: string;
  message: string;
}

/**
 * The body of every error answer, 4xx and 5xx alike: `{error: {code, message, fields?, details?}}`. `code` is stable
 * and machine-readable (`VALIDATION_FAILED`, `NOT_FOUND`, `QUEUE_FULL`…), `message` says what to change, `fields`
 * names each part of the request at fault, `details` carries structured extras (`retryAfterSeconds` on a 429 or 503).
 */
export interface ErrorBody {
  error: {
    code: string;
    message: string;
    fields?: FieldError[];
    details?: Record<string, unknown>;
  };
}

export function errorBody(
  code: string,
  message: string,
  fields: FieldError[] = [],
  details: Record<string, unknown> = {},
): ErrorBody {
  return {
    error: {
      code,
      message,
      ...(fields.length > 0 ? { fields } : {}),
      ...(Object.keys(details).length > 0 ? { details } : {}),
    },
  };
}
