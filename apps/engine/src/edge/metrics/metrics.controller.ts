import { Controller, Get, Inject, Req, Res } from '@nestjs/common';
import { ApiBearerAuth, ApiOkResponse, ApiOperation, ApiSecurity, ApiTags } from '@nestjs/swagger';
import type { Request, Response } from 'express';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { ApiKeys } from '../http/api-keys';
import { ApiErrors } from '../http/api-responses';
import { MetricsService } from '../../platform/metrics/metrics.service';

/**
 * Prometheus scrape endpoint. It carries no tenant data, so by default it takes no API key; with
 * `SWITCHYARD_METRICS_AUTH=api-key` it answers only requests with a valid key (any tenant's).
 */
@ApiTags('health')
@Controller('metrics')
export class MetricsController {
  constructor(
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
    private readonly metrics: MetricsService,
    private readonly keys: ApiKeys,
  ) {}

  @Get()
  @ApiOperation({
    summary: 'Prometheus metrics, in its text exposition format',
    description: 'No key needed, unless SWITCHYARD_METRICS_AUTH=api-key: then any tenant’s valid key.',
  })
  // The key is optional: `{}` (anonymous) or a bearer key.
  @ApiSecurity({})
  @ApiBearerAuth()
  @ApiOkResponse({
    description: 'The metrics',
    content: {
      'text/plain': {
        schema: {
          type: 'string',
          example: 'switchyard_actions_total{type="code",tier="subprocess",status="succeeded"} 3',
        },
      },
    },
  })
  @ApiErrors(401, 500)
  async scrape(@Req() req: Request, @Res() res: Response): Promise<void> {
    if (this.config.metricsAuth === 'api-key') this.keys.authenticate(req);
    const { contentType, body } = await this.metrics.scrape();
    res.setHeader('Content-Type', contentType);
    res.send(body);
  }
}
