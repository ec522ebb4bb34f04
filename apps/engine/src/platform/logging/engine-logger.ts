import type { LoggerService } from '@nestjs/common';
import { AsyncLocalStorage } from 'node:async_hooks';
import { randomBytes } from 'node:crypto';
import type { IncomingMessage, ServerResponse } from 'node:http';
import pino, { type Logger as Pino } from 'pino';
import type { LogLevel } from '../config/engine-config';
import { prettyStream } from './pretty-lines';

const REQUEST_ID = /^[\w.:-]{1,128}$/;
/** Nest's start-up chatter (every module initialized, every route mapped): useful when debugging, noise otherwise. */
const STARTUP_CONTEXTS = new Set(['InstanceLoader', 'RoutesResolver', 'RouterExplorer', 'NestFactory']);

/**
 * Structured logs through pino, one logger per engine (several engines may share a process in tests, so nothing here
 * is global): JSON lines, or the same lines made human-readable (`pretty`, for a terminal). Every line written while
 * serving a request carries its `requestId`, taken from the caller's `X-Request-Id` when sane or made up, and echoed
 * in the response header.
 */
export class EngineLogger implements LoggerService {
  private readonly pino: Pino;
  private readonly requests = new AsyncLocalStorage<{ requestId: string }>();

  constructor(level: LogLevel, options: { stream?: NodeJS.WritableStream; pretty?: boolean } = {}) {
    const out = options.pretty
      ? prettyStream(options.stream ?? process.stdout)
      : (options.stream ?? pino.destination({ dest: 1, sync: true }));
    this.pino = pino(
      {
        level,
        timestamp: pino.stdTimeFunctions.isoTime,
        formatters: { level: (label, number) => ({ level: number, levelName: label }) },
      },
      out as pino.DestinationStream,
    );
  }

  /** The request id of the request being served, if any. */
  requestId(): string | undefined {
    return this.requests.getStore()?.requestId;
  }

  /** Express middleware: assigns the request id, runs the rest of the request in its context, logs the outcome. */
  middleware() {
    return (req: IncomingMessage, res: ServerResponse, next: () => void): void => {
      const given = req.headers['x-request-id'];
      const requestId =
        typeof given === 'string' && REQUEST_ID.test(given) ? given : `req_${randomBytes(8).toString('hex')}`;
      res.setHeader('X-Request-Id', requestId);
      (req as IncomingMessage & { id?: string }).id = requestId;
      const t0 = performance.now();
      res.on('finish', () => {
        const status = res.statusCode;
        // The engine's own line per action says more than the request line: requests log at debug unless they fail.
        // A 502 says a server behind the engine failed (a session's port, a replica), not the engine: a warning.
        const level = status >= 500 && status !== 502 ? 'error' : status >= 400 ? 'warn' : 'debug';
        this.pino[level]({
          msg: 'request',
          requestId,
          method: req.method,
          // Express's `originalUrl`; the ports proxy is served before Express (its `url` is the original).
          url: withoutTokens((req as { originalUrl?: string }).originalUrl ?? req.url ?? '/'),
          status,
          durationMs: Math.round(performance.now() - t0),
        });
      });
      this.requests.run({ requestId }, next);
    };
  }

  log(message: unknown, ...rest: unknown[]): void {
    this.write(STARTUP_CONTEXTS.has(rest.at(-1) as string) ? 'debug' : 'info', message, rest);
  }
  error(message: unknown, ...rest: unknown[]): void {
    this.write('error', message, rest);
  }
  warn(message: unknown, ...rest: unknown[]): void {
    this.write('warn', message, rest);
  }
  debug(message: unknown, ...rest: unknown[]): void {
    this.write('debug', message, rest);
  }
  verbose(message: unknown, ...rest: unknown[]): void {
    this.write('trace', message, rest);
  }
  fatal(message: unknown, ...rest: unknown[]): void {
    this.write('fatal', message, rest);
  }

  /** Nest calls `(message, context)` or `(message, stack, context)`: objects become fields, strings `msg`. */
  private write(level: pino.Level, message: unknown, rest: unknown[]): void {
    if (!this.pino.isLevelEnabled(level)) return;
    const context = typeof rest.at(-1) === 'string' ? (rest.at(-1) as string) : undefined;
    const stack = level === 'error' && rest.length > 1 && typeof rest[0] === 'string' ? rest[0] : undefined;
    const requestId = this.requestId();
    const fields: Record<string, unknown> = {
      ...(context && { context }),
      ...(requestId && { requestId }),
      ...(stack && { stack }),
    };
    if (message instanceof Error) {
      this.pino[level]({ ...fields, msg: message.message, stack: message.stack });
    } else if (message && typeof message === 'object') {
      this.pino[level]({ ...fields, ...(message as Record<string, unknown>) });
    } else {
      this.pino[level]({ ...fields, msg: String(message) });
    }
  }
}

/**
 * A URL as logged: the short-lived access tokens some URLs carry (a preview link's `switchyard_token`, a terminal
 * WebSocket's `token`) are credentials, kept out of the logs.
 */
export function withoutTokens(url: string): string {
  return url.replace(/([?&](?:switchyard_token|token)=)[^&#]*/g, '$1***');
}
