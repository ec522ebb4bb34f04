import type { INestApplication } from '@nestjs/common';
import type { NextFunction, Request, Response } from 'express';
import { MetricsService } from './metrics.service';

/** Counts every HTTP request by its route pattern (not the raw URL, which would explode the label set). */
export function installHttpMetrics(app: INestApplication): void {
  const metrics = app.get(MetricsService);
  app.use((req: Request, res: Response, next: NextFunction) => {
    const t0 = performance.now();
    res.on('finish', () => {
      const route = (req.route as { path?: string } | undefined)?.path;
      const pattern = route ? `${req.baseUrl}${route}` : 'unmatched';
      metrics.httpRequest(req.method, pattern, res.statusCode, (performance.now() - t0) / 1000);
    });
    next();
  });
}
