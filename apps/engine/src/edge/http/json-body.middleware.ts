import type { INestApplication } from '@nestjs/common';
import * as express from 'express';
import type { NextFunction, Request, Response } from 'express';
import { errorBody } from '../../platform/validation/error-body';
import { JsonInputProblem, parseBoundedJson } from '../../platform/validation/json-input';

interface BodyParserError extends Error {
  status?: number;
  type?: string;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

/**
 * Decodes, bounds and parses a JSON body (or any JSON the engine is sent, e.g. a WebSocket frame); a problem is a
 * `JsonInputProblem` naming the part at fault.
 */
export function parseJsonBody(raw: Buffer): unknown {
  // An empty body is an empty object, as body-parser had it.
  if (raw.length === 0) return {};
  let text: string;
  try {
    text = utf8.decode(raw);
  } catch {
    throw new JsonInputProblem('body', 'is not valid UTF-8', 'INVALID_UTF8');
  }
  return parseBoundedJson(text);
}

/** Whether the request carries a body at all (as body-parser decides it). */
function hasBody(req: Request): boolean {
  const length = req.headers['content-length'];
  return req.headers['transfer-encoding'] !== undefined || (length !== undefined && length !== '0');
}

/**
 * JSON body parsing with our own error shapes: the body is read raw (within SWITCHYARD_MAX_BODY_BYTES), decoded as
 * strict UTF-8, checked for depth and for its number of values before parsing, then for objects of too many keys, for
 * keys and strings nothing downstream can handle safely. A body of another media type or charset is refused rather
 * than ignored. Body-parser's errors never reach Nest's filters, so every refusal is answered here, in the format of
 * every other error.
 */
/** A request whose JSON body was read: its bytes as sent, kept for a replica to forward them unchanged. */
export interface RawBodyRequest extends Request {
  rawBody?: Buffer;
}

/**
 * Uploads of the file transfer API (`PUT …/files/content`, `PUT …/files/archive`): raw bytes of any size, streamed
 * by their controller straight to the workspace, so neither read nor bounded here.
 */
const STREAMED_BODY = /^\/v1\/sessions\/[^/]+\/files\/(?:content|archive)\/?$/;

export function installJsonBody(
  app: INestApplication,
  maxBodyBytes: number,
  /** Other requests whose bodies are streamed by their handler (the ports proxy's: the session's server's bytes). */
  streamed: (req: Request) => boolean = () => false,
): void {
  const read = express.raw({ limit: maxBodyBytes, type: ['application/json', 'application/*+json'] });
  const refuse = (res: Response, status: number, code: string, field: string, message: string) =>
    res
      .status(status)
      .json(
        errorBody(code, field === 'body' ? `request body ${message}` : `${field}: ${message}`, [
          { path: field, message },
        ]),
      );
  app.use((req: Request, res: Response, next: NextFunction) => {
    // Any method: what is not a PUT there is answered 405 (or ignores its body) further on.
    if (STREAMED_BODY.test(req.path) || streamed(req)) return next();
    read(req, res, (err?: unknown) => {
      if (err) {
        const e = err as BodyParserError;
        if (e.type === 'entity.too.large' || e.status === 413) {
          res
            .status(413)
            .json(
              errorBody(
                'BODY_TOO_LARGE',
                `request body exceeds ${maxBodyBytes} bytes (SWITCHYARD_MAX_BODY_BYTES)`,
              ),
            );
          return;
        }
        const status = e.status && e.status >= 400 && e.status < 500 ? e.status : 400;
        refuse(res, status, 'BAD_BODY', 'body', e.message);
        return;
      }
      if (!Buffer.isBuffer(req.body)) {
        // A body of another type would be ignored, and the request served as if it had none.
        if (!hasBody(req)) return next();
        const type = (req.headers['content-type'] ?? 'none').slice(0, 100);
        refuse(
          res,
          415,
          'UNSUPPORTED_MEDIA_TYPE',
          'body',
          `has content type ${JSON.stringify(type)}; send JSON with content-type: application/json`,
        );
        return;
      }
      const charset = /;\s*charset\s*=\s*"?([^";\s]+)/i.exec(req.headers['content-type'] ?? '')?.[1];
      if (charset && !/^utf-?8$/i.test(charset)) {
        refuse(res, 415, 'UNSUPPORTED_CHARSET', 'body', `charset "${charset}" is not supported; send UTF-8`);
        return;
      }
      try {
        (req as RawBodyRequest).rawBody = req.body;
        req.body = parseJsonBody(req.body);
      } catch (problem) {
        if (!(problem instanceof JsonInputProblem)) return next(problem);
        refuse(res, 400, problem.code, problem.field, problem.message);
        return;
      }
      next();
    });
  });
}
