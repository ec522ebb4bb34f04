import { Module } from '@nestjs/common';
import { TerminusModule } from '@nestjs/terminus';
import { ActionsModule } from '../../engine/actions/actions.module';
import { HealthController } from './health.controller';
import { ReadinessController } from './readiness.controller';

/** `/health` (tiers and graph store) and the liveness/readiness probes. */
@Module({
  imports: [TerminusModule.forRoot({ errorLogStyle: 'json' }), ActionsModule],
  controllers: [HealthController, ReadinessController],
})
export class HealthModule {}
