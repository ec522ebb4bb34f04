import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { ApiExcludeEndpoint } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import { ApiKeys } from '../http/api-keys';
import { MetricsService } from './metrics.service';

/**
 * Prometheus scrape endpoint. It carries no tenant data, so by default it takes no API key; with
 * `SWITCHYARD_METRICS_AUTH=api-key` it answers only requests with a valid key (any tenant's).
 */
@Controller('metrics')
export class MetricsController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly metrics: MetricsService,
    private readonly keys: ApiKeys,
  ) {}

  @Get()
  @ApiExcludeEndpoint()
  async scrape(@Req() req: Request, @Res() res: Response): Promise<void> {
    if (this.config.metricsAuth === 'api-key') this.keys.authenticate(req);
    const { contentType, body } = await this.metrics.scrape();
    res.setHeader('Content-Type', contentType);
    res.send(body);
  }
}
