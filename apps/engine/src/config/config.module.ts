import { type DynamicModule, Global, Module } from '@nestjs/common';
import { CLOCK, type Clock, systemClock } from '@switchyard/common';
import { ENGINE_CONFIG } from './config.tokens';
import type { EngineConfig } from './engine-config';

/** The validated configuration and the one clock, visible to every module of the engine. */
@Global()
@Module({})
export class ConfigModule {
  static forRoot(config: EngineConfig, clock: Clock = systemClock): DynamicModule {
    return {
      module: ConfigModule,
      providers: [
        { provide: ENGINE_CONFIG, useValue: config },
        { provide: CLOCK, useValue: clock },
      ],
      exports: [ENGINE_CONFIG, CLOCK],
    };
  }
}
