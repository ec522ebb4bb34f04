import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import { readConfigDocument } from '../../platform/config/config-document';
import type { EngineConfig } from '../../platform/config/engine-config';
import { type HookDefinition, readHooks } from './hook-file';

/** Reads the hooks file once at boot: one that cannot be used stops start-up naming the variable. */
export function readEngineHooks(file: string | undefined): HookDefinition[] {
  return file ? readConfigDocument('SWITCHYARD_HOOKS_FILE', file, readHooks) : [];
}

/** Injection token of the configured hooks (`HookDefinition[]`, from SWITCHYARD_HOOKS_FILE). */
export const ENGINE_HOOKS = Symbol('ENGINE_HOOKS');

export const engineHooksProvider = {
  provide: ENGINE_HOOKS,
  useFactory: (config: EngineConfig): HookDefinition[] => readEngineHooks(config.hooks.file),
  inject: [ENGINE_CONFIG],
};
