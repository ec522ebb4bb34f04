import { Module } from '@nestjs/common';
import { MetricsService } from './metrics.service';

/** Prometheus metrics of this engine and their scrape endpoint. */
@Module({ providers: [MetricsService], exports: [MetricsService] })
export class MetricsModule {}
