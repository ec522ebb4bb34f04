import type { INestApplication } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import type { IncomingMessage, ServerResponse } from 'node:http';
import { MetricsService } from './metrics.service';

/** Counts every HTTP request by its route pattern (not the raw URL, which would explode the label set). */
export function installHttpMetrics(app: INestApplication): void {
  const metrics = app.get(MetricsService);
  app.use((req: Request, res: Response, next: NextFunction) => {
    countHttpRequest(metrics, req, res, () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      return route ? `${req.baseUrl}${route}` : 'unmatched';
    });
    next();
  });
}

/** Counts `req` once `res` is finished, under the route pattern `pattern()` says then. */
export function countHttpRequest(
  metrics: MetricsService,
  req: IncomingMessage,
  res: ServerResponse,
  pattern: () => string,
): void {
  const t0 = performance.now();
  res.on('finish', () => {
    metrics.httpRequest(req.method ?? 'GET', pattern(), res.statusCode, (performance.now() - t0) / 1000);
  });
}
