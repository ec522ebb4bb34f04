import { ArgumentsHost, Catch, ExceptionFilter, HttpException, HttpStatus, Logger } from '@nestjs/common';
import type { ErrorKind } from '@switchyard/common';
import { SwitchyardError } from '@switchyard/common';
import type { Response } from 'express';

const STATUS_BY_KIND: Record<ErrorKind, number> = {
  invalid_input: HttpStatus.BAD_REQUEST,
  not_found: HttpStatus.NOT_FOUND,
  conflict: HttpStatus.CONFLICT,
  unprocessable: HttpStatus.UNPROCESSABLE_ENTITY,
  rate_limited: HttpStatus.TOO_MANY_REQUESTS,
  payload_too_large: HttpStatus.PAYLOAD_TOO_LARGE,
  unavailable: HttpStatus.SERVICE_UNAVAILABLE,
  internal: HttpStatus.INTERNAL_SERVER_ERROR,
};

/** Body of every error response. */
export interface ErrorBody {
  statusCode: number;
  error: string;
  message: string;
  code?: string;
  details?: Record<string, unknown>;
  /** Field-level problems of a rejected request body. */
  errors?: { field: string; message: string }[];
}

/**
 * The one place where errors become HTTP: domain errors by their kind, Nest's own HTTP exceptions as
 * they are, anything else is logged and answered as a bare 500 so internals never leak.
 */
@Catch()
export class DomainErrorFilter implements ExceptionFilter {
  private readonly logger = new Logger('HTTP');

  catch(exception: unknown, host: ArgumentsHost): void {
    const res = host.switchToHttp().getResponse<Response>();
    const body = this.toBody(exception);
    if (res.headersSent) return;
    const retryAfter = body.details?.retryAfterSeconds;
    if (typeof retryAfter === 'number')
      res.setHeader('Retry-After', String(Math.max(1, Math.ceil(retryAfter))));
    res.status(body.statusCode).json(body);
  }

  private toBody(exception: unknown): ErrorBody {
    if (exception instanceof SwitchyardError) {
      const statusCode = STATUS_BY_KIND[exception.kind];
      return {
        statusCode,
        error: HttpStatus[statusCode] ?? 'Error',
        message: exception.message,
        code: exception.code,
        details: exception.details,
      };
    }
    if (exception instanceof HttpException) {
      const statusCode = exception.getStatus();
      const response = exception.getResponse();
      if (typeof response === 'object' && response !== null) {
        return { statusCode, error: HttpStatus[statusCode] ?? 'Error', ...response } as ErrorBody;
      }
      return { statusCode, error: HttpStatus[statusCode] ?? 'Error', message: String(response) };
    }
    this.logger.error(
      exception instanceof Error ? (exception.stack ?? exception.message) : String(exception),
    );
    return { statusCode: 500, error: 'INTERNAL_SERVER_ERROR', message: 'internal error' };
  }
}
