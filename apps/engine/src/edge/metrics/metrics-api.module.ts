import { Module } from '@nestjs/common';
import { MetricsModule } from '../../platform/metrics/metrics.module';
import { MetricsController } from './metrics.controller';

/** The REST endpoints of Metrics, over the module that does the work. */
@Module({
  imports: [MetricsModule],
  controllers: [MetricsController],
})
export class MetricsApiModule {}
