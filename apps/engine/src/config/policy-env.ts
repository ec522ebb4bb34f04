import { InvalidInputError } from '@switchyard/common';
import { IsIn, IsOptional, IsString, MinLength } from 'class-validator';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { readPolicy } from '../policies/policy-rules';
import type { PolicyRule } from '../policies/policy.types';
import { configFailure } from './config-error';
import { IntVar, ListVar } from './env-parsing';

/** Who may approve or reject an action waiting for approval. */
export const APPROVERS = ['admin', 'tenant'] as const;
export type Approvers = (typeof APPROVERS)[number];

/** Which tools agents may use, who decides what waits for approval, and who the admins are. */
export class PolicyEnv {
  /**
   * The engine's policy layer: a JSON (`{"rules": [...]}`) or TOML (`[[rules]]`) file of allow/deny/ask rules, above
   * every tenant's, session's and plan's. Unset: no engine rules.
   */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_POLICY_FILE?: string = undefined;

  /**
   * Comma-separated bearer keys of admins: they set tenants' policies and approve or reject any tenant's actions.
   * Each is also a key of the API (a tenant of its own).
   */
  @ListVar()
  @MinLength(16, { each: true })
  SWITCHYARD_ADMIN_KEYS: string[] = [];

  /**
   * Who decides approvals: `admin` (admin keys only) or `tenant` (the session's own key, and admins). Default: `admin`
   * when SWITCHYARD_ADMIN_KEYS is set, else `tenant`.
   */
  @IsOptional()
  @IsIn(APPROVERS)
  SWITCHYARD_APPROVERS?: Approvers = undefined;

  /** How long an action waits for approval before it ends `denied` (expired). */
  @IntVar(1000, 7 * 24 * 3600 * 1000)
  SWITCHYARD_APPROVAL_TIMEOUT_MS = 15 * 60 * 1000;
}

export interface PolicyConfig {
  /** The engine layer's rules and the file they came from (`undefined`: none set). */
  engine: { file?: string; rules: PolicyRule[] };
  adminKeys: string[];
  approvers: Approvers;
  approvalTimeoutMs: number;
}

/** Reads the policy file once at boot: one that cannot be used stops start-up naming the variable. */
function readPolicyFile(file: string): PolicyRule[] {
  const variable = 'SWITCHYARD_POLICY_FILE';
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    configFailure(variable, `${file}: ${(err as Error).message}`);
  }
  let value: unknown;
  try {
    value = file.endsWith('.toml') ? parseToml(text) : JSON.parse(text);
  } catch (err) {
    configFailure(
      variable,
      `${file} is not valid ${file.endsWith('.toml') ? 'TOML' : 'JSON'}: ${(err as Error).message}`,
    );
  }
  try {
    return readPolicy(value, 'policy');
  } catch (err) {
    if (err instanceof InvalidInputError) configFailure(variable, `${file}: ${err.field}: ${err.message}`);
    throw err;
  }
}

export function policyConfig(env: PolicyEnv, cwd: string): PolicyConfig {
  const file = env.SWITCHYARD_POLICY_FILE && path.resolve(cwd, env.SWITCHYARD_POLICY_FILE);
  return {
    engine: file ? { file, rules: readPolicyFile(file) } : { rules: [] },
    adminKeys: env.SWITCHYARD_ADMIN_KEYS,
    approvers: env.SWITCHYARD_APPROVERS ?? (env.SWITCHYARD_ADMIN_KEYS.length > 0 ? 'admin' : 'tenant'),
    approvalTimeoutMs: env.SWITCHYARD_APPROVAL_TIMEOUT_MS,
  };
}
