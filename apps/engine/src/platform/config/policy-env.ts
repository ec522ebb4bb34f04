import { IsIn, IsOptional, IsString, MinLength } from 'class-validator';
import * as path from 'node:path';
import { IntVar, ListVar } from './env-parsing';

/** Who may approve or reject an action waiting for approval. */
export const APPROVERS = ['admin', 'tenant'] as const;
export type Approvers = (typeof APPROVERS)[number];

/** Which tools agents may use, who decides what waits for approval, and who the admins are. */
export class PolicyEnv {
  /**
   * The engine's policy layer: a JSON (`{"rules": [...]}`) or TOML (`[[rules]]`) file of allow/deny/ask rules, above
   * every tenant's, session's and plan's; read at start-up. Unset: no engine rules.
   */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_POLICY_FILE?: string = undefined;

  /**
   * Comma-separated bearer keys of admins: they set tenants' policies, approve or reject any tenant's actions and list
   * the hooks. Each is also a key of the API (a tenant of its own).
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

  /** How long an action waits for approval before it ends `denied` (`APPROVAL_EXPIRED`). */
  @IntVar(1000, 7 * 24 * 3600 * 1000)
  SWITCHYARD_APPROVAL_TIMEOUT_MS = 15 * 60 * 1000;
}

export interface PolicyConfig {
  /** The engine layer's policy file (`undefined`: none set), read at boot by the policies module. */
  file?: string;
  adminKeys: string[];
  approvers: Approvers;
  approvalTimeoutMs: number;
}

export function policyConfig(env: PolicyEnv, cwd: string): PolicyConfig {
  const file = env.SWITCHYARD_POLICY_FILE && path.resolve(cwd, env.SWITCHYARD_POLICY_FILE);
  return {
    ...(file && { file }),
    adminKeys: env.SWITCHYARD_ADMIN_KEYS,
    approvers: env.SWITCHYARD_APPROVERS ?? (env.SWITCHYARD_ADMIN_KEYS.length > 0 ? 'admin' : 'tenant'),
    approvalTimeoutMs: env.SWITCHYARD_APPROVAL_TIMEOUT_MS,
  };
}
