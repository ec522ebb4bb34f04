import {
  AHEAD_BOUNDS,
  CONTAINER_LIMIT_BOUNDS,
  CONTAINER_RUNTIME_SETTINGS,
  type ContainerRuntimeSetting,
  POOL_BOUNDS,
  POOLED_BOUNDS,
} from '@switchyard/sandbox';
import { IsIn, IsOptional, IsString, Matches } from 'class-validator';
import * as path from 'node:path';
import { configFailure } from './config-error';
import { AbsolutePathVar, DecimalVar, IntVar, MiB } from './env-parsing';
import type { SandboxEnv } from './sandbox-env';

/** The two container tiers (pooled and one-off): their image, the Docker engine, the pool and their limits. */
export class ContainerEnv {
  /**
   * Sandbox image of both container tiers. Default: the tag `npm run sandbox:image` wrote to `.runtime/sandbox-image.tag`.
   */
  @IsOptional()
  @Matches(/^[\w][\w.\-/:@]*$/, { message: 'must be an image reference like switchyard/sandbox:tag' })
  SWITCHYARD_SANDBOX_IMAGE?: string = undefined;

  /** Docker engine of both container tiers, as Docker's own tools read it. Unset: the local socket. */
  @IsOptional()
  @IsString()
  DOCKER_HOST?: string = undefined;

  /**
   * Warm containers (pods) kept ready for sessions' first pooled action however quiet it is: the pool's floor. After a
   * burst of claims the pool holds more (SWITCHYARD_POOL_DEMAND_WINDOW_MS). 0: no warm pool.
   */
  @IntVar(POOL_BOUNDS.min.min, POOL_BOUNDS.min.max)
  SWITCHYARD_POOL_MIN = 2;

  /** Most warm (unclaimed) containers (pods) at once, idle or starting; each idle one takes about 10 MiB with its shim. */
  @IntVar(POOL_BOUNDS.max.min, POOL_BOUNDS.max.max)
  SWITCHYARD_POOL_MAX = 16;

  /**
   * Most warm containers (pods) starting at once. Default: twice the CPU cores, at least 4 and at most 8 (a start
   * waits on Docker or the API server as much as it computes: with 2 cores, 4 at once kept 58-59 of 60 back-to-back
   * claims warm where 2 kept 22-23).
   */
  @IntVar(POOL_BOUNDS.starts.min, POOL_BOUNDS.starts.max)
  SWITCHYARD_POOL_STARTS?: number = undefined;

  /**
   * How long a burst of claims keeps the pool above its floor: it holds SWITCHYARD_POOL_MIN plus the most claims that
   * came within one container start time (at least a second) during this window, at most SWITCHYARD_POOL_MAX.
   */
  @IntVar(POOL_BOUNDS.demandWindowMs.min, POOL_BOUNDS.demandWindowMs.max)
  SWITCHYARD_POOL_DEMAND_WINDOW_MS = 60_000;

  /**
   * Most sessions holding a pooled container at once; beyond it pooled actions are `denied` (`error.class: limit`,
   * code `POOL_SESSIONS_EXHAUSTED`, naming this setting) until one ends. A session stops counting once its DELETE
   * has answered, while its container is still being removed.
   */
  @IntVar(POOL_BOUNDS.maxSessions.min, POOL_BOUNDS.maxSessions.max)
  SWITCHYARD_POOL_MAX_SESSIONS = 16;

  /**
   * How long a pooled action's claim waits for a healthy warm container; past it the action is `denied` (`error.class:
   * limit`, code `POOL_ACQUIRE_TIMEOUT`).
   */
  @IntVar(POOL_BOUNDS.acquireTimeoutMs.min, POOL_BOUNDS.acquireTimeoutMs.max)
  SWITCHYARD_POOL_ACQUIRE_TIMEOUT_MS = 10_000;

  /** A session's container idle this long is destroyed (its next pooled action claims a fresh one). */
  @IntVar(1000, POOLED_BOUNDS.sessionIdleTimeoutMs.max)
  SWITCHYARD_POOL_SESSION_IDLE_MS = 900_000;

  /**
   * Host directory for the pooled tier's per-container mount points; must be the same path for the Docker daemon.
   * Default: `<tmpdir>/switchyard-pooled`.
   */
  @AbsolutePathVar()
  SWITCHYARD_POOL_MOUNT_ROOT?: string = undefined;

  /** Memory limit of each pooled container. */
  @IntVar(CONTAINER_LIMIT_BOUNDS.memoryBytes.min)
  SWITCHYARD_POOLED_MEMORY_BYTES = 512 * MiB;

  /** CPU limit of each pooled container, in CPUs. */
  @DecimalVar(CONTAINER_LIMIT_BOUNDS.cpus.min, CONTAINER_LIMIT_BOUNDS.cpus.max)
  SWITCHYARD_POOLED_CPUS = 1;

  /** Process limit of each pooled container. */
  @IntVar(CONTAINER_LIMIT_BOUNDS.pids.min, CONTAINER_LIMIT_BOUNDS.pids.max)
  SWITCHYARD_POOLED_PIDS = 128;

  /** Longest `timeoutMs` a pooled action may ask for (beyond: `denied`). Default: SWITCHYARD_MAX_TIMEOUT_MS. */
  @IntVar(1)
  SWITCHYARD_POOLED_MAX_TIMEOUT_MS?: number = undefined;

  /** Output cap per stream of pooled actions. Default: SWITCHYARD_OUTPUT_MAX_BYTES. */
  @IntVar(1024)
  SWITCHYARD_POOLED_OUTPUT_MAX_BYTES?: number = undefined;

  /**
   * Docker runtime of the one-off tier: `runsc` (gVisor), `runc`, or `auto` (runsc when the Docker engine has a runtime
   * of that name, else the engine's default). An explicit `runsc` the engine lacks makes the tier unavailable, naming
   * this setting (never runc instead). The pooled tier always uses the engine's default (runc).
   */
  @IsOptional()
  @IsIn(CONTAINER_RUNTIME_SETTINGS)
  SWITCHYARD_CONTAINER_RUNTIME: ContainerRuntimeSetting = 'auto';

  /** Memory limit of each one-off container. */
  @IntVar(CONTAINER_LIMIT_BOUNDS.memoryBytes.min)
  SWITCHYARD_CONTAINER_MEMORY_BYTES = 512 * MiB;

  /** CPU limit of each one-off container, in CPUs. */
  @DecimalVar(CONTAINER_LIMIT_BOUNDS.cpus.min, CONTAINER_LIMIT_BOUNDS.cpus.max)
  SWITCHYARD_CONTAINER_CPUS = 1;

  /** Process limit of each one-off container. */
  @IntVar(CONTAINER_LIMIT_BOUNDS.pids.min, CONTAINER_LIMIT_BOUNDS.pids.max)
  SWITCHYARD_CONTAINER_PIDS = 128;

  /**
   * Longest `timeoutMs` a one-off container action may ask for (beyond: `denied`). Default: SWITCHYARD_MAX_TIMEOUT_MS.
   */
  @IntVar(1)
  SWITCHYARD_CONTAINER_MAX_TIMEOUT_MS?: number = undefined;

  /** Output cap per stream of one-off container actions. Default: SWITCHYARD_OUTPUT_MAX_BYTES. */
  @IntVar(1024)
  SWITCHYARD_CONTAINER_OUTPUT_MAX_BYTES?: number = undefined;

  /**
   * One-off containers started ahead: after a session's one-off run (from its second), its next container is started
   * with the same settings and waits for the code (each still runs one action and is removed after it). Most held at
   * once over all sessions; 0: none. An idle one holds about 9 MiB (runc) or 31 MiB (gVisor) of memory (PSS, with its
   * shim).
   */
  @IntVar(AHEAD_BOUNDS.max.min, AHEAD_BOUNDS.max.max)
  SWITCHYARD_CONTAINER_AHEAD_MAX = 4;

  /** A one-off container started ahead and not used within this long is removed. */
  @IntVar(AHEAD_BOUNDS.idleMs.min, AHEAD_BOUNDS.idleMs.max)
  SWITCHYARD_CONTAINER_AHEAD_IDLE_MS = 60_000;
}

/** Limits of one container tier. */
export interface ContainerTierConfig {
  memoryBytes: number;
  nanoCpus: number;
  pids: number;
  maxTimeoutMs: number;
  outputMaxBytes: number;
}

export interface ContainerTiersConfig {
  /** Explicit image (SWITCHYARD_SANDBOX_IMAGE), else the tag in `imageTagFile`. */
  image?: string;
  /** Absolute path of the tag file `npm run sandbox:image` writes: `.runtime/sandbox-image.tag` in the working dir. */
  imageTagFile: string;
  /** The Docker engine's address (DOCKER_HOST); unset: the local socket. */
  dockerHost?: string;
  pool: {
    min: number;
    max: number;
    /** Unset: the library's default (the CPU cores, 2–8). */
    starts?: number;
    demandWindowMs: number;
    maxSessions: number;
    acquireTimeoutMs: number;
    sessionIdleTimeoutMs: number;
    mountRoot?: string;
  };
  pooled: ContainerTierConfig;
  container: ContainerTierConfig;
  /** Docker runtime of the one-off tier (SWITCHYARD_CONTAINER_RUNTIME). */
  containerRuntime: ContainerRuntimeSetting;
  /** One-off containers started ahead (SWITCHYARD_CONTAINER_AHEAD_*). */
  containerAhead: { max: number; idleMs: number };
}

/** The tiers' limits fall back to the global ones. */
type TiersEnv = ContainerEnv & Pick<SandboxEnv, 'SWITCHYARD_MAX_TIMEOUT_MS' | 'SWITCHYARD_OUTPUT_MAX_BYTES'>;

function tierConfig(env: TiersEnv, tier: 'POOLED' | 'CONTAINER'): ContainerTierConfig {
  return {
    memoryBytes: env[`SWITCHYARD_${tier}_MEMORY_BYTES`],
    nanoCpus: Math.round(env[`SWITCHYARD_${tier}_CPUS`] * 1e9),
    pids: env[`SWITCHYARD_${tier}_PIDS`],
    maxTimeoutMs: env[`SWITCHYARD_${tier}_MAX_TIMEOUT_MS`] ?? env.SWITCHYARD_MAX_TIMEOUT_MS,
    outputMaxBytes: env[`SWITCHYARD_${tier}_OUTPUT_MAX_BYTES`] ?? env.SWITCHYARD_OUTPUT_MAX_BYTES,
  };
}

/**
 * DOCKER_HOST as dockerode would take it, refused here rather than at the first Docker call: unix:// and
 * npipe:// are socket paths, anything else must be a URL (`tcp://` when no scheme is given).
 */
function dockerHost(value: string | undefined): string | undefined {
  // Empty is unset for dockerode too: the local socket.
  if (!value) return undefined;
  if (/^(unix|npipe):\/\//.test(value)) return value;
  try {
    new URL(value.includes('//') ? value : `tcp://${value}`);
  } catch {
    configFailure(
      'DOCKER_HOST',
      `must be unix:///path/to/docker.sock or tcp://host:port (got ${JSON.stringify(value)})`,
    );
  }
  return value;
}

/** Relative paths are taken from `cwd`, the engine's working directory. */
export function containerTiersConfig(env: TiersEnv, cwd: string): ContainerTiersConfig {
  return {
    image: env.SWITCHYARD_SANDBOX_IMAGE,
    imageTagFile: path.resolve(cwd, '.runtime', 'sandbox-image.tag'),
    dockerHost: dockerHost(env.DOCKER_HOST),
    pool: {
      min: env.SWITCHYARD_POOL_MIN,
      max: env.SWITCHYARD_POOL_MAX,
      ...(env.SWITCHYARD_POOL_STARTS !== undefined && { starts: env.SWITCHYARD_POOL_STARTS }),
      demandWindowMs: env.SWITCHYARD_POOL_DEMAND_WINDOW_MS,
      maxSessions: env.SWITCHYARD_POOL_MAX_SESSIONS,
      acquireTimeoutMs: env.SWITCHYARD_POOL_ACQUIRE_TIMEOUT_MS,
      sessionIdleTimeoutMs: env.SWITCHYARD_POOL_SESSION_IDLE_MS,
      mountRoot: env.SWITCHYARD_POOL_MOUNT_ROOT,
    },
    pooled: tierConfig(env, 'POOLED'),
    container: tierConfig(env, 'CONTAINER'),
    containerRuntime: env.SWITCHYARD_CONTAINER_RUNTIME,
    containerAhead: {
      max: env.SWITCHYARD_CONTAINER_AHEAD_MAX,
      idleMs: env.SWITCHYARD_CONTAINER_AHEAD_IDLE_MS,
    },
  };
}
