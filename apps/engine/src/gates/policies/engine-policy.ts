import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import { readConfigDocument } from '../../platform/config/config-document';
import type { EngineConfig } from '../../platform/config/engine-config';
import { readPolicy } from '../../state/policies/policy-rules';
import type { PolicyRule } from '../../state/policies/policy.types';

/** The engine's policy layer: its rules and the file they came from (none when SWITCHYARD_POLICY_FILE is unset). */
export interface EnginePolicy {
  file?: string;
  rules: PolicyRule[];
}

/** Reads the policy file once at boot: one that cannot be used stops start-up naming the variable. */
export function readEnginePolicy(file: string | undefined): EnginePolicy {
  if (!file) return { rules: [] };
  return {
    file,
    rules: readConfigDocument('SWITCHYARD_POLICY_FILE', file, (doc) => readPolicy(doc, 'policy')),
  };
}

/** Injection token of the `EnginePolicy`. */
export const ENGINE_POLICY = Symbol('ENGINE_POLICY');

export const enginePolicyProvider = {
  provide: ENGINE_POLICY,
  useFactory: (config: EngineConfig): EnginePolicy => readEnginePolicy(config.policy.file),
  inject: [ENGINE_CONFIG],
};
