import { Module } from '@nestjs/common';
import { KernelsModule } from '../../session/kernels/kernels.module';
import { SessionsModule } from '../../session/sessions/sessions.module';
import { KernelsController } from './kernels.controller';

/** The REST endpoints of Kernels, over the module that does the work. */
@Module({
  imports: [KernelsModule, SessionsModule],
  controllers: [KernelsController],
})
export class KernelsApiModule {}
