import { plainToInstance, Transform } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsOptional,
  IsString,
  Max,
  Min,
  MinLength,
  validateSync,
  ValidationError,
} from 'class-validator';
import * as path from 'node:path';

export const LOG_LEVELS = ['error', 'warn', 'info', 'debug'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

const MiB = 1024 * 1024;

const toInt = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^-?\d+$/.test(value.trim()) ? Number(value.trim()) : value;
const toBool = ({ value }: { value: unknown }): unknown => {
  if (typeof value !== 'string') return value;
  const v = value.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off', ''].includes(v)) return false;
  return value;
};
const toList = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string'
    ? value
        .split(',')
        .map((s) => s.trim())
        .filter((s) => s.length > 0)
    : value;

/**
 * Every environment variable the engine reads, with its default. Validated once at boot; a bad value
 * stops start-up naming the variable. The README's configuration table mirrors this class.
 */
export class EngineEnv {
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(65535)
  PORT = 8080;

  @IsOptional()
  @IsString()
  @MinLength(1)
  HOST = '127.0.0.1';

  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_DATA_DIR = './data';

  /** Comma-separated bearer tokens; each one is a tenant. Empty = open (no auth). */
  @IsOptional()
  @Transform(toList)
  @IsString({ each: true })
  @MinLength(16, { each: true })
  SWITCHYARD_API_KEYS: string[] = [];

  @IsOptional()
  @IsIn(LOG_LEVELS)
  SWITCHYARD_LOG_LEVEL: LogLevel = 'info';

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(7 * 24 * 3600)
  SWITCHYARD_SESSION_TTL_SECONDS = 3600;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(30 * 24 * 3600)
  SWITCHYARD_MAX_SESSION_TTL_SECONDS = 24 * 3600;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(50)
  @Max(3_600_000)
  SWITCHYARD_SWEEP_INTERVAL_MS = 30_000;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(100_000)
  SWITCHYARD_MAX_SESSIONS = 1000;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  @Max(1024 * MiB)
  SWITCHYARD_MAX_BODY_BYTES = 8 * MiB;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(3_600_000)
  SWITCHYARD_DEFAULT_TIMEOUT_MS = 30_000;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(24 * 3_600_000)
  SWITCHYARD_MAX_TIMEOUT_MS = 300_000;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(512 * MiB)
  SWITCHYARD_MAX_CODE_BYTES = 1 * MiB;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  @Max(1024 * MiB)
  SWITCHYARD_OUTPUT_MAX_BYTES = 1 * MiB;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(10_000_000)
  SWITCHYARD_OUTPUT_MAX_LINES = 2000;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  SWITCHYARD_MAX_FILE_BYTES = 5 * MiB;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  SWITCHYARD_MAX_WORKSPACE_BYTES = 1024 * MiB;

  /** Lets a caller request a weaker tier than the risk policy picks. Off: never weaker. */
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  SWITCHYARD_ALLOW_WEAKER_TIER = false;

  /** Risk score thresholds for medium, high and critical, as `20,50,80`. */
  @IsOptional()
  @Transform(toList)
  @IsString({ each: true })
  SWITCHYARD_RISK_THRESHOLDS: string[] = ['20', '50', '80'];

  /** Risk rule ids to switch off, comma-separated. */
  @IsOptional()
  @Transform(toList)
  @IsString({ each: true })
  SWITCHYARD_RISK_DISABLED_RULES: string[] = [];

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(16 * MiB)
  SWITCHYARD_SUBPROCESS_MEMORY_BYTES = 512 * MiB;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(8)
  @Max(4096)
  SWITCHYARD_SUBPROCESS_PIDS = 128;
}

export interface RiskThresholdConfig {
  medium: number;
  high: number;
  critical: number;
}

/** The validated configuration, one object for the whole engine. */
export interface EngineConfig {
  port: number;
  host: string;
  dataDir: string;
  apiKeys: string[];
  logLevel: LogLevel;
  sessions: {
    defaultTtlSeconds: number;
    maxTtlSeconds: number;
    sweepIntervalMs: number;
    maxSessions: number;
  };
  http: { maxBodyBytes: number };
  sandbox: {
    defaultTimeoutMs: number;
    maxTimeoutMs: number;
    maxCodeBytes: number;
    output: { maxBytes: number; maxLines: number };
    allowWeakerTier: boolean;
    riskThresholds: RiskThresholdConfig;
    disabledRiskRules: string[];
    subprocess: { memoryBytes: number; pids: number };
  };
  workspace: { maxFileBytes: number; maxWorkspaceBytes: number };
}

export class ConfigError extends Error {
  constructor(readonly problems: { variable: string; message: string }[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  ${p.variable}: ${p.message}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

function flatten(errors: ValidationError[]): { variable: string; message: string }[] {
  return errors.map((e) => ({
    variable: e.property,
    message: `${Object.values(e.constraints ?? {}).join('; ')} (got ${JSON.stringify(e.value)})`,
  }));
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
    throw new ConfigError([
      {
        variable: 'SWITCHYARD_RISK_THRESHOLDS',
        message: `expected three increasing integers 1–100 as "medium,high,critical" (got "${raw.join(',')}")`,
      },
    ]);
  }
  return { medium, high, critical };
}

/** Reads and validates the environment. Throws `ConfigError` naming every bad variable. */
export function loadEngineConfig(env: NodeJS.ProcessEnv = process.env): EngineConfig {
  const known = Object.keys(new EngineEnv());
  const raw: Record<string, string> = {};
  for (const key of known) {
    const value = env[key];
    if (value !== undefined) raw[key] = value;
  }
  const parsed = plainToInstance(EngineEnv, raw);
  const errors = validateSync(parsed, { forbidUnknownValues: true });
  if (errors.length > 0) throw new ConfigError(flatten(errors));
  if (parsed.SWITCHYARD_DEFAULT_TIMEOUT_MS > parsed.SWITCHYARD_MAX_TIMEOUT_MS) {
    throw new ConfigError([
      { variable: 'SWITCHYARD_DEFAULT_TIMEOUT_MS', message: 'must not exceed SWITCHYARD_MAX_TIMEOUT_MS' },
    ]);
  }
  if (parsed.SWITCHYARD_SESSION_TTL_SECONDS > parsed.SWITCHYARD_MAX_SESSION_TTL_SECONDS) {
    throw new ConfigError([
      {
        variable: 'SWITCHYARD_SESSION_TTL_SECONDS',
        message: 'must not exceed SWITCHYARD_MAX_SESSION_TTL_SECONDS',
      },
    ]);
  }
  return {
    port: parsed.PORT,
    host: parsed.HOST,
    dataDir: path.resolve(parsed.SWITCHYARD_DATA_DIR),
    apiKeys: parsed.SWITCHYARD_API_KEYS,
    logLevel: parsed.SWITCHYARD_LOG_LEVEL,
    sessions: {
      defaultTtlSeconds: parsed.SWITCHYARD_SESSION_TTL_SECONDS,
      maxTtlSeconds: parsed.SWITCHYARD_MAX_SESSION_TTL_SECONDS,
      sweepIntervalMs: parsed.SWITCHYARD_SWEEP_INTERVAL_MS,
      maxSessions: parsed.SWITCHYARD_MAX_SESSIONS,
    },
    http: { maxBodyBytes: parsed.SWITCHYARD_MAX_BODY_BYTES },
    sandbox: {
      defaultTimeoutMs: parsed.SWITCHYARD_DEFAULT_TIMEOUT_MS,
      maxTimeoutMs: parsed.SWITCHYARD_MAX_TIMEOUT_MS,
      maxCodeBytes: parsed.SWITCHYARD_MAX_CODE_BYTES,
      output: { maxBytes: parsed.SWITCHYARD_OUTPUT_MAX_BYTES, maxLines: parsed.SWITCHYARD_OUTPUT_MAX_LINES },
      allowWeakerTier: parsed.SWITCHYARD_ALLOW_WEAKER_TIER,
      riskThresholds: parseThresholds(parsed.SWITCHYARD_RISK_THRESHOLDS),
      disabledRiskRules: parsed.SWITCHYARD_RISK_DISABLED_RULES,
      subprocess: {
        memoryBytes: parsed.SWITCHYARD_SUBPROCESS_MEMORY_BYTES,
        pids: parsed.SWITCHYARD_SUBPROCESS_PIDS,
      },
    },
    workspace: {
      maxFileBytes: parsed.SWITCHYARD_MAX_FILE_BYTES,
      maxWorkspaceBytes: parsed.SWITCHYARD_MAX_WORKSPACE_BYTES,
    },
  };
}
