import { type DynamicModule, Global, Module } from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import { ENGINE_CONFIG, ENGINE_INSTANCE_ID } from './config.tokens';
import type { EngineConfig } from './engine-config';

/** The validated configuration, the one clock and the engine's id, visible to every module of the engine. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: EngineConfig, clock: Clock = systemClock, instanceId = 'engine'): DynamicModule {
    return {
      module: ConfigModule,
      providers: [
        { provide: ENGINE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: clock },
        { provide: ENGINE_INSTANCE_ID, useValue: instanceId },
      ],
      exports: [ENGINE_CONFIG, CLOCK, ENGINE_INSTANCE_ID],
    };
  }
}
