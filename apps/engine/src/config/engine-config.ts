import { plainToInstance, Transform } from 'class-transformer';
import {
  IsBoolean,
  IsIn,
  IsInt,
  IsNumber,
  IsOptional,
  Matches,
  IsString,
  Max,
  Min,
  MinLength,
  validateSync,
  ValidationError,
} from 'class-validator';
import { ValidateIf } from 'class-validator';
import * as path from 'node:path';
import { AllowlistEntryError, parseAllowlist } from '@switchyard/browser';

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
const toDecimal = ({ value }: { value: unknown }): unknown =>
  typeof value === 'string' && /^\d+(\.\d+)?$/.test(value.trim()) ? Number(value.trim()) : value;
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

  /** `auto`: each workspace is its own loop-mounted filesystem of SWITCHYARD_MAX_WORKSPACE_BYTES when possible. */
  @IsOptional()
  @IsIn(['auto', 'loop', 'off'])
  SWITCHYARD_WORKSPACE_QUOTA: 'auto' | 'loop' | 'off' = 'auto';

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

  /** Off: `/health` reports the browser tier unavailable and browser actions are denied. */
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  SWITCHYARD_BROWSER_ENABLED = true;

  @IsOptional()
  @IsString()
  @Matches(/^\/[^\0]*$/, { message: 'must be an absolute path' })
  SWITCHYARD_BROWSER_EXECUTABLE = '/usr/bin/chromium';

  /** Hosts, addresses and CIDRs browsed pages may reach although they are not public, comma-separated. */
  @IsOptional()
  @Transform(toList)
  @IsString({ each: true })
  SWITCHYARD_BROWSER_ALLOWLIST: string[] = [];

  /** Allow the `evaluate` op (page JavaScript, scored by the risk policy). */
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  SWITCHYARD_BROWSER_EVALUATE = false;

  /** Browser contexts open at once (shared-browser contexts plus dedicated browsers). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  SWITCHYARD_BROWSER_MAX_CONTEXTS = 16;

  /** Dedicated browser processes at once. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(256)
  SWITCHYARD_BROWSER_MAX_DEDICATED = 4;

  /** Timeout of a browser op when the action gives none. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(100)
  @Max(3_600_000)
  SWITCHYARD_BROWSER_TIMEOUT_MS = 30_000;

  /** A session's browser context unused this long is closed. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(2 ** 31 - 1)
  SWITCHYARD_BROWSER_IDLE_MS = 600_000;

  /** Largest screenshot, PDF, download or upload. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  SWITCHYARD_BROWSER_MAX_ARTIFACT_BYTES = 50 * MiB;

  /** Start the shared browser at boot instead of at the first browser action. */
  @IsOptional()
  @Transform(toBool)
  @IsBoolean()
  SWITCHYARD_BROWSER_PRELAUNCH = false;

  /** Actions running at once across all sessions. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1024)
  SWITCHYARD_MAX_CONCURRENT_ACTIONS = 16;

  /** Actions waiting for a slot across all sessions; beyond it requests get 429 with Retry-After. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(100_000)
  SWITCHYARD_MAX_QUEUED_ACTIONS = 256;

  /** Actions waiting per session; beyond it that session's requests get 429. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(10_000)
  SWITCHYARD_SESSION_MAX_QUEUED = 32;

  /** Default `maxConcurrentActions` of a session: 1 runs its actions one at a time. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(16)
  SWITCHYARD_SESSION_CONCURRENCY = 1;

  /** Events kept per session for SSE clients resuming with Last-Event-ID. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(10)
  @Max(1_000_000)
  SWITCHYARD_EVENTS_BUFFER = 1000;

  /** How long an Idempotency-Key's first answer is kept. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(60)
  @Max(30 * 24 * 3600)
  SWITCHYARD_IDEMPOTENCY_TTL_SECONDS = 24 * 3600;

  /** Longest retry chain (RETRY_OF links) an action may start. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(1000)
  SWITCHYARD_MAX_RETRY_DEPTH = 10;

  /** Env variables whose values are secrets to redact from every output (besides *KEY*, *TOKEN*, *SECRET*…). */
  @IsOptional()
  @Transform(toList)
  @IsString({ each: true })
  @Matches(/^[A-Za-z_][A-Za-z0-9_]*$/, { each: true, message: 'each must be an environment variable name' })
  SWITCHYARD_SECRET_ENV_NAMES: string[] = [];

  /** Extra secret patterns to redact, as a JSON array of regular expressions: `["acme_[0-9a-f]{32}"]`. */
  @IsOptional()
  @IsString()
  SWITCHYARD_SECRET_PATTERNS?: string = undefined;

  /** TOML file with tool descriptions (`[bash] description = "…"`), read on every GET /v1/tools. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_TOOLS_FILE?: string = undefined;

  /** Sandbox image of both container tiers. Default: the tag `npm run sandbox:image` wrote. */
  @IsOptional()
  @Matches(/^[\w][\w.\-/:@]*$/, { message: 'must be an image reference like switchyard/sandbox:tag' })
  SWITCHYARD_SANDBOX_IMAGE?: string = undefined;

  /** Warm containers kept ready for sessions' first pooled action. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(64)
  SWITCHYARD_POOL_MIN = 2;

  /** Most warm (unclaimed) containers at once. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(256)
  SWITCHYARD_POOL_MAX = 8;

  /** Most sessions holding a pooled container at once; beyond it pooled actions are denied until one ends. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(4096)
  SWITCHYARD_POOL_MAX_SESSIONS = 16;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  @Max(600_000)
  SWITCHYARD_POOL_ACQUIRE_TIMEOUT_MS = 10_000;

  /** A session's container idle this long is destroyed (its next pooled action claims a fresh one). */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1000)
  @Max(2 ** 31 - 1)
  SWITCHYARD_POOL_SESSION_IDLE_MS = 900_000;

  /** Host directory for the pooled tier's per-container mount points; must be the same path for the Docker daemon. */
  @IsOptional()
  @Matches(/^\/[^\0]*$/, { message: 'must be an absolute path' })
  SWITCHYARD_POOL_MOUNT_ROOT?: string = undefined;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(16 * MiB)
  SWITCHYARD_POOLED_MEMORY_BYTES = 512 * MiB;

  @IsOptional()
  @Transform(toDecimal)
  @IsNumber()
  @Min(0.01)
  @Max(1024)
  SWITCHYARD_POOLED_CPUS = 1;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(64)
  @Max(256)
  SWITCHYARD_POOLED_PIDS = 128;

  /** Longest `timeoutMs` a pooled action may ask for. Default: SWITCHYARD_MAX_TIMEOUT_MS. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  SWITCHYARD_POOLED_MAX_TIMEOUT_MS?: number = undefined;

  /** Output cap per stream of pooled actions. Default: SWITCHYARD_OUTPUT_MAX_BYTES. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  SWITCHYARD_POOLED_OUTPUT_MAX_BYTES?: number = undefined;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(16 * MiB)
  SWITCHYARD_CONTAINER_MEMORY_BYTES = 512 * MiB;

  @IsOptional()
  @Transform(toDecimal)
  @IsNumber()
  @Min(0.01)
  @Max(1024)
  SWITCHYARD_CONTAINER_CPUS = 1;

  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(64)
  @Max(256)
  SWITCHYARD_CONTAINER_PIDS = 128;

  /** Longest `timeoutMs` a one-off container action may ask for. Default: SWITCHYARD_MAX_TIMEOUT_MS. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1)
  SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS?: number = undefined;

  /** Output cap per stream of one-off container actions. Default: SWITCHYARD_OUTPUT_MAX_BYTES. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(1024)
  SWITCHYARD_CONTAINER_OUTPUT_MAX_BYTES?: number = undefined;

  /** Where the context graph lives: `embedded` (SQLite in the data dir) or `neo4j` (behind a local outbox). */
  @IsOptional()
  @IsIn(['embedded', 'neo4j'])
  SWITCHYARD_GRAPH: 'embedded' | 'neo4j' = 'embedded';

  /** Neo4j's Bolt address; the NEO4J_* variables are read only with SWITCHYARD_GRAPH=neo4j. */
  @ValidateIf((e: EngineEnv) => e.SWITCHYARD_GRAPH === 'neo4j')
  @Matches(/^(bolt|neo4j)(\+s|\+ssc)?:\/\/[^\s/?#@:]+(:\d{1,5})?\/?$/, {
    message: 'must be bolt://host[:port] or neo4j://host[:port] (bolt+s, neo4j+s… for TLS)',
  })
  NEO4J_URI = 'bolt://127.0.0.1:7687';

  @ValidateIf((e: EngineEnv) => e.SWITCHYARD_GRAPH === 'neo4j')
  @IsString()
  @MinLength(1)
  NEO4J_USERNAME = 'neo4j';

  /** Unset: connect without authentication. */
  @IsOptional()
  @IsString()
  NEO4J_PASSWORD?: string = undefined;

  @ValidateIf((e: EngineEnv) => e.SWITCHYARD_GRAPH === 'neo4j')
  @Matches(/^[A-Za-z][A-Za-z0-9.-]{2,62}$/, { message: 'must be a Neo4j database name' })
  NEO4J_DATABASE = 'neo4j';

  /** How long start-up waits for Neo4j to answer before failing. */
  @IsOptional()
  @Transform(toInt)
  @IsInt()
  @Min(0)
  @Max(600_000)
  SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS = 30_000;
}

/** Limits of one container tier. */
export interface ContainerTierConfig {
  memoryBytes: number;
  nanoCpus: number;
  pids: number;
  maxTimeoutMs: number;
  outputMaxBytes: number;
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
    /** Explicit image, else the tag file written by `npm run sandbox:image`. */
    image?: string;
    pool: {
      min: number;
      max: number;
      maxSessions: number;
      acquireTimeoutMs: number;
      sessionIdleTimeoutMs: number;
      mountRoot?: string;
    };
    pooled: ContainerTierConfig;
    container: ContainerTierConfig;
  };
  workspace: { maxFileBytes: number; maxWorkspaceBytes: number; quota: 'auto' | 'loop' | 'off' };
  browser: {
    enabled: boolean;
    executablePath: string;
    allowlist: string[];
    evaluate: boolean;
    maxContexts: number;
    maxDedicated: number;
    timeoutMs: number;
    idleMs: number;
    maxArtifactBytes: number;
    prelaunch: boolean;
  };
  tools: { descriptionsFile?: string };
  redaction: {
    /** Compiled from SWITCHYARD_SECRET_PATTERNS. */
    patterns: RegExp[];
    /** Literal values of the SWITCHYARD_SECRET_ENV_NAMES variables, as patterns. */
    values: RegExp[];
  };
  actions: {
    maxRunning: number;
    maxQueued: number;
    maxQueuedPerSession: number;
    sessionConcurrency: number;
    eventsBuffer: number;
    idempotencyTtlSeconds: number;
    maxRetryDepth: number;
  };
  graph: GraphConfig;
}

/** Which store holds the context graph (see `apps/engine/src/graph/graph-store.ts`). */
export type GraphConfig =
  | { store: 'embedded' }
  | {
      store: 'neo4j';
      neo4j: { uri: string; username: string; password?: string; database: string; connectTimeoutMs: number };
    };

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

/** Cross-field checks of the browser tier's variables, and the allowlist's entries. */
function checkBrowserEnv(parsed: EngineEnv): void {
  if (parsed.SWITCHYARD_BROWSER_TIMEOUT_MS > parsed.SWITCHYARD_MAX_TIMEOUT_MS) {
    throw new ConfigError([
      { variable: 'SWITCHYARD_BROWSER_TIMEOUT_MS', message: 'must not exceed SWITCHYARD_MAX_TIMEOUT_MS' },
    ]);
  }
  if (parsed.SWITCHYARD_BROWSER_MAX_DEDICATED > parsed.SWITCHYARD_BROWSER_MAX_CONTEXTS) {
    throw new ConfigError([
      {
        variable: 'SWITCHYARD_BROWSER_MAX_DEDICATED',
        message: 'must not exceed SWITCHYARD_BROWSER_MAX_CONTEXTS',
      },
    ]);
  }
  try {
    parseAllowlist(parsed.SWITCHYARD_BROWSER_ALLOWLIST);
  } catch (err) {
    if (err instanceof AllowlistEntryError) {
      throw new ConfigError([{ variable: 'SWITCHYARD_BROWSER_ALLOWLIST', message: err.message }]);
    }
    throw err;
  }
}

function parseSecretPatterns(raw: string | undefined): RegExp[] {
  if (raw === undefined || raw.trim() === '') return [];
  const fail = (message: string): never => {
    throw new ConfigError([{ variable: 'SWITCHYARD_SECRET_PATTERNS', message }]);
  };
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    return fail('must be a JSON array of regular expressions, e.g. ["acme_[0-9a-f]{32}"]');
  }
  if (!Array.isArray(list) || !list.every((p) => typeof p === 'string' && p.length > 0)) {
    return fail('must be a JSON array of non-empty strings');
  }
  return (list as string[]).map((source) => {
    try {
      const re = new RegExp(source, 'g');
      if (re.test('')) fail(`pattern ${JSON.stringify(source)} matches the empty string`);
      re.lastIndex = 0;
      return re;
    } catch (err) {
      if (err instanceof ConfigError) throw err;
      return fail(`pattern ${JSON.stringify(source)}: ${(err as Error).message}`);
    }
  });
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
  if (parsed.SWITCHYARD_POOL_MIN > parsed.SWITCHYARD_POOL_MAX) {
    throw new ConfigError([
      { variable: 'SWITCHYARD_POOL_MIN', message: 'must not exceed SWITCHYARD_POOL_MAX' },
    ]);
  }
  for (const name of ['SWITCHYARD_POOLED_MAX_TIMEOUT_MS', 'SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS'] as const) {
    const value = parsed[name];
    if (value !== undefined && value < parsed.SWITCHYARD_DEFAULT_TIMEOUT_MS) {
      // The default timeout is lowered to a tier's maximum, so this only warns nobody; refuse the surprise instead.
      throw new ConfigError([{ variable: name, message: 'must not be below SWITCHYARD_DEFAULT_TIMEOUT_MS' }]);
    }
  }
  checkBrowserEnv(parsed);
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
      image: parsed.SWITCHYARD_SANDBOX_IMAGE,
      pool: {
        min: parsed.SWITCHYARD_POOL_MIN,
        max: parsed.SWITCHYARD_POOL_MAX,
        maxSessions: parsed.SWITCHYARD_POOL_MAX_SESSIONS,
        acquireTimeoutMs: parsed.SWITCHYARD_POOL_ACQUIRE_TIMEOUT_MS,
        sessionIdleTimeoutMs: parsed.SWITCHYARD_POOL_SESSION_IDLE_MS,
        mountRoot: parsed.SWITCHYARD_POOL_MOUNT_ROOT,
      },
      pooled: {
        memoryBytes: parsed.SWITCHYARD_POOLED_MEMORY_BYTES,
        nanoCpus: Math.round(parsed.SWITCHYARD_POOLED_CPUS * 1e9),
        pids: parsed.SWITCHYARD_POOLED_PIDS,
        maxTimeoutMs: parsed.SWITCHYARD_POOLED_MAX_TIMEOUT_MS ?? parsed.SWITCHYARD_MAX_TIMEOUT_MS,
        outputMaxBytes: parsed.SWITCHYARD_POOLED_OUTPUT_MAX_BYTES ?? parsed.SWITCHYARD_OUTPUT_MAX_BYTES,
      },
      container: {
        memoryBytes: parsed.SWITCHYARD_CONTAINER_MEMORY_BYTES,
        nanoCpus: Math.round(parsed.SWITCHYARD_CONTAINER_CPUS * 1e9),
        pids: parsed.SWITCHYARD_CONTAINER_PIDS,
        maxTimeoutMs: parsed.SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS ?? parsed.SWITCHYARD_MAX_TIMEOUT_MS,
        outputMaxBytes: parsed.SWITCHYARD_CONTAINER_OUTPUT_MAX_BYTES ?? parsed.SWITCHYARD_OUTPUT_MAX_BYTES,
      },
    },
    workspace: {
      maxFileBytes: parsed.SWITCHYARD_MAX_FILE_BYTES,
      maxWorkspaceBytes: parsed.SWITCHYARD_MAX_WORKSPACE_BYTES,
      quota: parsed.SWITCHYARD_WORKSPACE_QUOTA,
    },
    browser: {
      enabled: parsed.SWITCHYARD_BROWSER_ENABLED,
      executablePath: parsed.SWITCHYARD_BROWSER_EXECUTABLE,
      allowlist: parsed.SWITCHYARD_BROWSER_ALLOWLIST,
      evaluate: parsed.SWITCHYARD_BROWSER_EVALUATE,
      maxContexts: parsed.SWITCHYARD_BROWSER_MAX_CONTEXTS,
      maxDedicated: parsed.SWITCHYARD_BROWSER_MAX_DEDICATED,
      timeoutMs: parsed.SWITCHYARD_BROWSER_TIMEOUT_MS,
      idleMs: parsed.SWITCHYARD_BROWSER_IDLE_MS,
      maxArtifactBytes: parsed.SWITCHYARD_BROWSER_MAX_ARTIFACT_BYTES,
      prelaunch: parsed.SWITCHYARD_BROWSER_PRELAUNCH,
    },
    tools: { descriptionsFile: parsed.SWITCHYARD_TOOLS_FILE && path.resolve(parsed.SWITCHYARD_TOOLS_FILE) },
    redaction: {
      patterns: parseSecretPatterns(parsed.SWITCHYARD_SECRET_PATTERNS),
      values: parsed.SWITCHYARD_SECRET_ENV_NAMES.flatMap((name) => {
        const value = env[name];
        return value && value.length >= 4
          ? [new RegExp(value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g')]
          : [];
      }),
    },
    actions: {
      maxRunning: parsed.SWITCHYARD_MAX_CONCURRENT_ACTIONS,
      maxQueued: parsed.SWITCHYARD_MAX_QUEUED_ACTIONS,
      maxQueuedPerSession: parsed.SWITCHYARD_SESSION_MAX_QUEUED,
      sessionConcurrency: parsed.SWITCHYARD_SESSION_CONCURRENCY,
      eventsBuffer: parsed.SWITCHYARD_EVENTS_BUFFER,
      idempotencyTtlSeconds: parsed.SWITCHYARD_IDEMPOTENCY_TTL_SECONDS,
      maxRetryDepth: parsed.SWITCHYARD_MAX_RETRY_DEPTH,
    },
    graph:
      parsed.SWITCHYARD_GRAPH === 'neo4j'
        ? {
            store: 'neo4j',
            neo4j: {
              uri: parsed.NEO4J_URI,
              username: parsed.NEO4J_USERNAME,
              password: parsed.NEO4J_PASSWORD,
              database: parsed.NEO4J_DATABASE,
              connectTimeoutMs: parsed.SWITCHYARD_GRAPH_CONNECT_TIMEOUT_MS,
            },
          }
        : { store: 'embedded' },
  };
}
