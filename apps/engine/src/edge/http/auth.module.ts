import { Global, Module } from '@nestjs/common';
import { ApiKeyGuard } from './api-key.guard';
import { ApiKeys } from './api-keys';

/** API keys and the guard of the tenant routes, visible to every feature module's controllers. */
@Global()
@Module({ providers: [ApiKeys, ApiKeyGuard], exports: [ApiKeys, ApiKeyGuard] })
export class AuthModule {}
