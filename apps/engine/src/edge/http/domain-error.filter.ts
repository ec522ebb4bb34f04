import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { ErrorKind } from '@switchyard/common';
import { SwitchyardError } from '@switchyard/common';
import type { Response } from 'express';
import { BEARER_CHALLENGE, UnauthenticatedException } from './api-keys';
import { ErrorBody, errorBody } from '../../platform/validation/error-body';

const STATUS_BY_KIND: Record<ErrorKind, number> = {
  invalid_input: HttpStatus.BAD_REQUEST,
  not_found: HttpStatus.NOT_FOUND,
  forbidden: HttpStatus.FORBIDDEN,
  conflict: HttpStatus.CONFLICT,
  unprocessable: HttpStatus.UNPROCESSABLE_ENTITY,
  rate_limited: HttpStatus.TOO_MANY_REQUESTS,
  payload_too_large: HttpStatus.PAYLOAD_TOO_LARGE,
  unavailable: HttpStatus.SERVICE_UNAVAILABLE,
  bad_gateway: HttpStatus.BAD_GATEWAY,
  internal: HttpStatus.INTERNAL_SERVER_ERROR,
};

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

/** A domain error's answer: a `field` in its details names the part of the request at fault. */
function domainBody(exception: SwitchyardError): ErrorBody {
  const { field, ...details } = exception.details;
  const fields = typeof field === 'string' ? [{ path: field, message: exception.message }] : [];
  return errorBody(exception.code, exception.message, fields, details);
}

/** Nest's own exceptions (unknown route, 401…) and ours that carry a ready `ErrorBody`. */
function httpBody(status: number, response: string | object): ErrorBody {
  if (isRecord(response) && isRecord(response.error) && typeof response.error.code === 'string') {
    return response as unknown as ErrorBody;
  }
  const fallbackCode = HttpStatus[status] ?? `HTTP_${status}`;
  if (typeof response === 'string') return errorBody(fallbackCode, response);
  if (!isRecord(response)) return errorBody(fallbackCode, fallbackCode);
  const message = Array.isArray(response.message)
    ? response.message.map(String).join('; ')
    : typeof response.message === 'string'
      ? response.message
      : fallbackCode;
  return errorBody(typeof response.code === 'string' ? response.code : fallbackCode, message);
}

/** How an error is answered over HTTP: its status, its body, and the `WWW-Authenticate` challenge of a 401. */
export interface ErrorAnswer {
  status: number;
  body: ErrorBody;
  challenge?: string;
}

const logger = new Logger('HTTP');

/**
 * The one place where errors become HTTP: domain errors by their kind, Nest's own HTTP exceptions by their status,
 * anything else is logged and answered as a bare 500 so internals never leak. Every body is an `ErrorBody`. Used by
 * the filter below, and by what answers outside Nest's routes (a WebSocket upgrade refused).
 */
export function errorAnswer(exception: unknown): ErrorAnswer {
  const [status, body] = answer(exception);
  // A 401 says how to authenticate (RFC 9110): the engine's one scheme is a bearer key.
  if (status !== 401) return { status, body };
  const challenge = exception instanceof UnauthenticatedException ? exception.challenge : BEARER_CHALLENGE;
  return { status, body, challenge };
}

function answer(exception: unknown): [number, ErrorBody] {
  if (exception instanceof SwitchyardError) {
    return [STATUS_BY_KIND[exception.kind], domainBody(exception)];
  }
  if (exception instanceof HttpException) {
    return [exception.getStatus(), httpBody(exception.getStatus(), exception.getResponse())];
  }
  logger.error(exception instanceof Error ? (exception.stack ?? exception.message) : String(exception));
  return [500, errorBody('INTERNAL', 'internal error')];
}

/** Answers every error a route throws (see `errorAnswer`). */
@Catch()
export class DomainErrorFilter implements ExceptionFilter {
  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const { status, body, challenge } = errorAnswer(exception);
    if (res.headersSent) return;
    const retryAfter = body.error.details?.retryAfterSeconds;
    if (typeof retryAfter === 'number')
      res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfter))));
    if (challenge !== undefined) res.setHeader('WWW-Authenticate', challenge);
    res.status(status).json(body);
  }
}
