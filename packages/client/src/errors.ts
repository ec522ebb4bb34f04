/** A field of a rejected request and what is wrong with it. */
export interface FieldError {
  field: string;
  message: string;
}

/**
 * An answer the engine refused (non-2xx), or a request that never reached it (`status` 0, `code`
 * `CONNECTION_FAILED`). `code` is the engine's stable machine-readable code (`NOT_FOUND`, `VALIDATION_FAILED`…).
 */
export class SwitchyardError extends Error {
  override readonly name = 'SwitchyardError';

  constructor(
    message: string,
    readonly status: number,
    readonly code: string,
    readonly fields: FieldError[] = [],
    readonly details?: Record<string, unknown>,
  ) {
    super(message);
  }
}

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * The one place that reads the engine's error body (`{statusCode, error, code?, message, errors?, details?}`): a
 * change of envelope touches only this function. Bodies that are not JSON objects (a proxy's HTML page) still give
 * an error naming the status.
 */
export function errorFromResponse(status: number, body: unknown): SwitchyardError {
  if (!isRecord(body)) {
    const text = typeof body === 'string' && body.trim() ? `: ${body.trim().slice(0, 200)}` : '';
    return new SwitchyardError(`HTTP ${status}${text}`, status, `HTTP_${status}`);
  }
  const fields = Array.isArray(body.errors)
    ? body.errors.filter(isRecord).map((e) => ({ field: String(e.field), message: String(e.message) }))
    : [];
  const code =
    typeof body.code === 'string'
      ? body.code
      : typeof body.error === 'string'
        ? body.error
        : `HTTP_${status}`;
  const message = typeof body.message === 'string' ? body.message : `HTTP ${status}`;
  return new SwitchyardError(
    message,
    status,
    code,
    fields,
    isRecord(body.details) ? body.details : undefined,
  );
}

/** A request that failed before any answer: the engine is not running at `baseUrl`, or the network dropped. */
export function connectionError(baseUrl: string, error: unknown): SwitchyardError {
  const cause = isRecord(error) && isRecord(error.cause) ? error.cause : undefined;
  const reason =
    typeof cause?.code === 'string' ? cause.code : error instanceof Error ? error.message : String(error);
  return new SwitchyardError(
    `cannot reach the Switchyard engine at ${baseUrl} (${reason}); is it running? Set SWITCHYARD_URL to its address`,
    0,
    'CONNECTION_FAILED',
  );
}
