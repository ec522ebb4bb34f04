import { Global, Module } from '@nestjs/common';
import { ApiKeyGuard } from './api-key.guard';
import { AccessTokens } from './access-tokens';
import { ApiKeys } from './api-keys';

/**
 * API keys, the guard of the tenant routes and the short-lived access tokens (previews, terminals' WebSockets),
 * visible to every feature module's controllers.
 */
@Global()
@Module({ providers: [ApiKeys, ApiKeyGuard, AccessTokens], exports: [ApiKeys, ApiKeyGuard, AccessTokens] })
export class AuthModule {}
