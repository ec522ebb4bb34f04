import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';
import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';

/** Name of the error body's schema in the OpenAPI document. */
export const ERROR_RESPONSE = 'ErrorResponse';

/**
 * The body of every error answer, as `DomainErrorFilter` and the JSON body middleware write it (`ErrorBody`). The
 * readiness probe's 503 is the one exception: terminus' own health report.
 */
export const ERROR_RESPONSE_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['statusCode', 'error', 'message'],
  properties: {
    statusCode: { type: 'integer', description: 'The HTTP status again', example: 404 },
    error: { type: 'string', description: 'Name of the HTTP status', example: 'NOT_FOUND' },
    code: {
      type: 'string',
      description: 'Stable machine-readable code (e.g. `VALIDATION_FAILED`, `NOT_FOUND`, `QUEUE_FULL`)',
      example: 'NOT_FOUND',
    },
    message: { type: 'string', description: 'What went wrong, and which setting to change when one applies' },
    errors: {
      type: 'array',
      description: 'Field-level problems of a rejected request',
      items: {
        type: 'object',
        required: ['field', 'message'],
        properties: { field: { type: 'string' }, message: { type: 'string' } },
      },
    },
    details: {
      type: 'object',
      additionalProperties: true,
      description: 'Structured detail, e.g. `{"field": "path"}`; `retryAfterSeconds` on a 429 or 503',
    },
  },
};

const ERROR_DESCRIPTIONS = {
  400: 'Invalid request: malformed JSON or a field, parameter or header that fails validation (`errors` names them)',
  401: 'Missing or unknown bearer token (only when SWITCHYARD_API_KEYS is set)',
  404: 'No such session, or no such resource in it',
  409: 'Conflicts with the current state (see `code`)',
  413: 'Request body over SWITCHYARD_MAX_BODY_BYTES, or a workspace, file or checkpoint cap reached',
  415: 'A body that is not UTF-8 JSON (`content-type: application/json`)',
  422: 'Idempotency-Key already used with a different request',
  429: 'Action queue full (engine or session): retry after `Retry-After` seconds',
  500: 'Unexpected failure (details are logged, never returned)',
  503: 'A dependency or capacity limit is unavailable, or the engine is shutting down',
} as const;

export type ErrorStatus = keyof typeof ERROR_DESCRIPTIONS;

/** Documents the error statuses an operation (or every operation of a controller) can answer, with `ErrorResponse`. */
export const ApiErrors = (...statuses: ErrorStatus[]): MethodDecorator & ClassDecorator =>
  applyDecorators(
    ...statuses.map((status) =>
      ApiResponse({
        status,
        description: ERROR_DESCRIPTIONS[status],
        content: { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_RESPONSE}` } } },
      }),
    ),
  );

/** The errors every `/v1` operation can answer: no valid key, or an unexpected failure. */
export const ApiV1Errors = (): ClassDecorator => ApiErrors(401, 500);

/** A JSON body can be too large or not JSON at all. */
export const ApiBodyErrors = (): MethodDecorator => ApiErrors(400, 413, 415);
