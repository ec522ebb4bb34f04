import type { INestApplication } from '@nestjs/common';
import * as express from 'express';
import type { NextFunction, Request, Response } from 'express';

interface BodyParserError extends Error {
  status?: number;
  type?: string;
}

/**
 * JSON body parsing with our own error shapes: body-parser's errors never reach Nest's filters, so a
 * malformed body (400) or an oversized one (413) is answered here, in the same format as every other error.
 */
export function installJsonBody(app: INestApplication, maxBodyBytes: number): void {
  const parse = express.json({
    limit: maxBodyBytes,
    strict: false,
    type: ['application/json', 'application/*+json'],
  });
  app.use((req: Request, res: Response, next: NextFunction) => {
    parse(req, res, (err?: unknown) => {
      if (!err) return next();
      const e = err as BodyParserError;
      if (e.type === 'entity.too.large' || e.status === 413) {
        res.status(413).json({
          statusCode: 413,
          error: 'PAYLOAD_TOO_LARGE',
          message: `request body exceeds ${maxBodyBytes} bytes (SWITCHYARD_MAX_BODY_BYTES)`,
          code: 'BODY_TOO_LARGE',
        });
        return;
      }
      const status = e.status && e.status >= 400 && e.status < 500 ? e.status : 400;
      res.status(status).json({
        statusCode: status,
        error: 'BAD_REQUEST',
        message: e.type === 'entity.parse.failed' ? `malformed JSON: ${e.message}` : e.message,
        code: e.type === 'entity.parse.failed' ? 'MALFORMED_JSON' : 'BAD_BODY',
        errors: [{ field: 'body', message: e.message }],
      });
    });
  });
}
