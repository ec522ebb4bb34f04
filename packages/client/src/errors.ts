/** A part of a rejected request (a body field's dotted path, a parameter or a header) and what is wrong with it. */
export interface FieldError {
  path: string;
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
 * The one place that reads the engine's error body (`{error: {code, message, fields?, details?}}`): a change of
 * envelope touches only this function. Bodies that are not that envelope (a proxy's HTML page) still give an error
 * naming the status.
 */
export function errorFromResponse(status: number, body: unknown): SwitchyardError {
  const error = isRecord(body) && isRecord(body.error) ? body.error : undefined;
  if (!error) {
    const text = typeof body === 'string' && body.trim() ? `: ${body.trim().slice(0, 200)}` : '';
    return new SwitchyardError(`HTTP ${status}${text}`, status, `HTTP_${status}`);
  }
  const fields = Array.isArray(error.fields)
    ? error.fields.filter(isRecord).map((e) => ({ path: String(e.path), message: String(e.message) }))
    : [];
  return new SwitchyardError(
    typeof error.message === 'string' ? error.message : `HTTP ${status}`,
    status,
    typeof error.code === 'string' ? error.code : `HTTP_${status}`,
    fields,
    isRecord(error.details) ? error.details : undefined,
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
