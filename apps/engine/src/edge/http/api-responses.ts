import { applyDecorators } from '@nestjs/common';
import { ApiResponse } from '@nestjs/swagger';
import type {
  HeaderObject,
  ReferenceObject,
  SchemaObject,
} from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { BEARER_CHALLENGE } from './api-keys';

/** Name of the error body's schema in the OpenAPI document. */
export const ERROR_RESPONSE = 'ErrorResponse';

/** The body of every error answer, 4xx and 5xx, as `errorBody` writes it (`ErrorBody`). */
export const ERROR_RESPONSE_SCHEMA: SchemaObject = {
  type: 'object',
  required: ['error'],
  additionalProperties: false,
  properties: {
    error: {
      type: 'object',
      required: ['code', 'message'],
      additionalProperties: false,
      properties: {
        code: {
          type: 'string',
          description:
            'Stable machine-readable code (e.g. `VALIDATION_FAILED`, `NOT_FOUND`, `QUEUE_FULL`, `UNAUTHENTICATED`)',
          example: 'VALIDATION_FAILED',
        },
        message: {
          type: 'string',
          description: 'What went wrong, and which field or setting to change when one applies',
          example: 'invalid request: language: must be one of python, node, bash',
        },
        fields: {
          type: 'array',
          description: 'Each part of the request at fault: a body field, a query parameter or a header',
          items: {
            type: 'object',
            required: ['path', 'message'],
            additionalProperties: false,
            properties: {
              path: {
                type: 'string',
                description:
                  'Dotted path of a body field (`steps[0].action.code`), or a parameter or header name',
                example: 'language',
              },
              message: { type: 'string', example: 'must be one of python, node, bash' },
            },
          },
        },
        details: {
          type: 'object',
          additionalProperties: true,
          description:
            'Structured extras, e.g. `retryAfterSeconds` on a 429 or 503, or the readiness report on `/health/ready`',
        },
      },
    },
  },
};

const ERROR_DESCRIPTIONS = {
  400: 'Invalid request: malformed JSON or a field, parameter or header that fails validation (`error.fields` names them)',
  401: 'Missing or unknown bearer token (only when SWITCHYARD_API_KEYS is set)',
  403: 'Authenticated, but not allowed: an admin-only operation, or an approval by a key that may not decide it',
  404: 'No such session, or no such resource in it',
  409: 'Conflicts with the current state (see `error.code`)',
  413: 'Request body over SWITCHYARD_MAX_BODY_BYTES, or a workspace, file or checkpoint cap reached',
  415: 'A body that is not UTF-8 JSON (`content-type: application/json`)',
  422: 'Idempotency-Key already used with a different request',
  429: 'Action queue full (engine or session): retry after `Retry-After` seconds',
  500: 'Unexpected failure (details are logged, never returned)',
  503: 'A dependency or capacity limit is unavailable, or the engine is shutting down',
} as const;

export type ErrorStatus = keyof typeof ERROR_DESCRIPTIONS;

/** Headers error answers carry besides their body, declared once in the document's `components.headers`. */
export const ERROR_HEADER_COMPONENTS: Record<string, HeaderObject> = {
  'WWW-Authenticate': {
    description:
      'The challenge (RFC 6750): a bearer key of the realm `switchyard`; `error="invalid_token"` when the key sent ' +
      'is not one of this engine',
    schema: { type: 'string', example: BEARER_CHALLENGE },
  },
};

const headerRef = (name: string): ReferenceObject => ({ $ref: `#/components/headers/${name}` });

/** Which of those headers each error status carries. */
const ERROR_HEADERS: Partial<Record<ErrorStatus, Record<string, ReferenceObject>>> = {
  401: { 'WWW-Authenticate': headerRef('WWW-Authenticate') },
};

/** Documents the error statuses an operation (or every operation of a controller) can answer, with `ErrorResponse`. */
export const ApiErrors = (...statuses: ErrorStatus[]): MethodDecorator & ClassDecorator =>
  applyDecorators(
    ...statuses.map((status) =>
      ApiResponse({
        status,
        description: ERROR_DESCRIPTIONS[status],
        ...(ERROR_HEADERS[status] && { headers: ERROR_HEADERS[status] }),
        content: { 'application/json': { schema: { $ref: `#/components/schemas/${ERROR_RESPONSE}` } } },
      }),
    ),
  );

/** The errors every `/v1` operation can answer: no valid key, or an unexpected failure. */
export const ApiV1Errors = (): ClassDecorator => ApiErrors(401, 500);

/** A JSON body can be too large or not JSON at all. */
export const ApiBodyErrors = (): MethodDecorator => ApiErrors(400, 413, 415);
