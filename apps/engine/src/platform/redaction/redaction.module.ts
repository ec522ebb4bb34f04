import { type DynamicModule, Global, Module } from '@nestjs/common';
import { SecretRedactor } from './secret-redactor';

/**
 * The one redactor of everything that leaves the engine (outputs, errors, inputs shown, logs), built once from the
 * patterns the sandbox tiers also apply to code output. Global: every edge that answers needs it.
 */
@Global()
@Module({})
export class RedactionModule {
  static forRoot(patterns: readonly RegExp[]): DynamicModule {
    return {
      module: RedactionModule,
      providers: [{ provide: SecretRedactor, useValue: new SecretRedactor(patterns) }],
      exports: [SecretRedactor],
    };
  }
}
