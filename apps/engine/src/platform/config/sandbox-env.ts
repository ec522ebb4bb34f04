import { SUBPROCESS_BOUNDS } from '@switchyard/sandbox';
import { configFailure } from './config-error';
import { BoolVar, DecimalVar, IntVar, ListVar, MiB } from './env-parsing';

/** What every tier shares (time, code and output limits, risk routing) and the subprocess tier's limits. */
export class SandboxEnv {
  /** Timeout of an action's code when the action gives no `timeoutMs`. */
  @IntVar(1, 3_600_000)
  SWITCHYARD_DEFAULT_TIMEOUT_MS = 30_000;

  /** Largest `timeoutMs` an action may ask for; the container tiers may lower it for their own actions. */
  @IntVar(1, 24 * 3_600_000)
  SWITCHYARD_MAX_TIMEOUT_MS = 300_000;

  /** Largest `code` an action may carry. */
  @IntVar(1, 512 * MiB)
  SWITCHYARD_MAX_CODE_BYTES = 1 * MiB;

  /** Cap on each output stream (stdout, stderr) of a run; a run that writes past it is stopped. */
  @IntVar(1024, 1024 * MiB)
  SWITCHYARD_OUTPUT_MAX_BYTES = 1 * MiB;

  /** Cap on the lines of each output stream of a run; a run that writes past it is stopped. */
  @IntVar(1, 10_000_000)
  SWITCHYARD_OUTPUT_MAX_LINES = 2000;

  /** Lets a caller request a weaker tier than the risk policy picks. Off: never weaker. */
  @BoolVar()
  SWITCHYARD_ALLOW_WEAKER_TIER = false;

  /** Risk score thresholds for medium, high and critical, as `20,50,80`. */
  @ListVar()
  SWITCHYARD_RISK_THRESHOLDS: string[] = ['20', '50', '80'];

  /** Risk rule ids to switch off, comma-separated. */
  @ListVar()
  SWITCHYARD_RISK_DISABLED_RULES: string[] = [];

  /** Memory limit of each subprocess-tier action. */
  @IntVar(16 * MiB)
  SWITCHYARD_SUBPROCESS_MEMORY_BYTES = 512 * MiB;

  /** Process limit of each subprocess-tier action (everything it forks counts). */
  @IntVar(8, 4096)
  SWITCHYARD_SUBPROCESS_PIDS = 128;

  /**
   * CPU quota of each subprocess-tier action, in CPUs, shared by all it forks (cgroup cpu controller; the code also
   * runs at niceness 19); at most the session's.
   */
  @DecimalVar(SUBPROCESS_BOUNDS.cpus.min, SUBPROCESS_BOUNDS.cpus.max)
  SWITCHYARD_SUBPROCESS_CPUS = 1;

  /**
   * CPU quota of each session in the subprocess tier, in CPUs, shared by all its concurrent actions, kernels and
   * background processes (one session cgroup above their own).
   */
  @DecimalVar(SUBPROCESS_BOUNDS.sessionCpus.min, SUBPROCESS_BOUNDS.sessionCpus.max)
  SWITCHYARD_SUBPROCESS_SESSION_CPUS = 1;
}

export interface RiskThresholdConfig {
  medium: number;
  high: number;
  critical: number;
}

export interface SandboxConfig {
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
  maxCodeBytes: number;
  output: { maxBytes: number; maxLines: number };
  allowWeakerTier: boolean;
  riskThresholds: RiskThresholdConfig;
  disabledRiskRules: string[];
  subprocess: { memoryBytes: number; pids: number; cpus: number; sessionCpus: number };
}

function parseThresholds(raw: string[]): RiskThresholdConfig {
  const nums = raw.map((s) => Number(s));
  const [medium, high, critical] = nums;
  const valid =
    nums.length === 3 &&
    nums.every((n) => Number.isInteger(n) && n >= 1 && n <= 100) &&
    medium < high &&
    high < critical;
  if (!valid) {
    configFailure(
      'SWITCHYARD_RISK_THRESHOLDS',
      `expected three increasing integers 1–100 as "medium,high,critical" (got "${raw.join(',')}")`,
    );
  }
  return { medium, high, critical };
}

export function sandboxConfig(env: SandboxEnv): SandboxConfig {
  return {
    defaultTimeoutMs: env.SWITCHYARD_DEFAULT_TIMEOUT_MS,
    maxTimeoutMs: env.SWITCHYARD_MAX_TIMEOUT_MS,
    maxCodeBytes: env.SWITCHYARD_MAX_CODE_BYTES,
    output: { maxBytes: env.SWITCHYARD_OUTPUT_MAX_BYTES, maxLines: env.SWITCHYARD_OUTPUT_MAX_LINES },
    allowWeakerTier: env.SWITCHYARD_ALLOW_WEAKER_TIER,
    riskThresholds: parseThresholds(env.SWITCHYARD_RISK_THRESHOLDS),
    disabledRiskRules: env.SWITCHYARD_RISK_DISABLED_RULES,
    subprocess: {
      memoryBytes: env.SWITCHYARD_SUBPROCESS_MEMORY_BYTES,
      pids: env.SWITCHYARD_SUBPROCESS_PIDS,
      cpus: env.SWITCHYARD_SUBPROCESS_CPUS,
      sessionCpus: env.SWITCHYARD_SUBPROCESS_SESSION_CPUS,
    },
  };
}
