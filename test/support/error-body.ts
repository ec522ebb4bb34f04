/** The engine's error envelope, `{error: {code, message, fields?, details?}}`, as the e2e tests read it. */
export interface ErrorEnvelope {
  error?: {
    code?: string;
    message?: string;
    fields?: { path: string; message: string }[];
    details?: Record<string, unknown>;
  };
}

/** Every part of the request an error answer names (`error.fields[].path`). */
export const fieldsOf = (body: unknown): string[] =>
  ((body as ErrorEnvelope | undefined)?.error?.fields ?? []).map((f) => f.path);

/** Whether `body` is the envelope: an `error` object with a string `code` and `message`. */
export const isErrorEnvelope = (body: unknown): boolean =>
  typeof (body as ErrorEnvelope | undefined)?.error?.code === 'string' &&
  typeof (body as ErrorEnvelope | undefined)?.error?.message === 'string';
