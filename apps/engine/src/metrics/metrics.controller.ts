import { Controller, Get, Res } from '@nestjs/common';
import { ApiExcludeEndpoint } from '@nestjs/swagger';
import type { Response } from 'express';
import { MetricsService } from './metrics.service';

/** Prometheus scrape endpoint. Like /health it carries no tenant data, so it takes no API key. */
@Controller('metrics')
export class MetricsController {
  constructor(private readonly metrics: MetricsService) {}

  @Get()
  @ApiExcludeEndpoint()
  async scrape(@Res() res: Response): Promise<void> {
    const { contentType, body } = await this.metrics.scrape();
    res.setHeader('Content-Type', contentType);
    res.send(body);
  }
}
