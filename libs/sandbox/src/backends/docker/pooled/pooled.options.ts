import { defaultWarmStarts } from '@switchyard/common';
import * as os from 'node:os';
import * as path from 'node:path';
import { defaultEngineInstanceId } from '../../../core/engine-instance';
import { readImageTag } from '../../../core/sandbox-image';
import { SandboxConfigError } from '../../../core/sandbox.errors';
import { type Bounds, checkIntegers, type IntegerOption } from '../../../core/integer-options';
import { CONTAINER_LIMIT_BOUNDS, POOL_BOUNDS } from '../../../core/container-bounds';
import { checkedBinds } from '../container.options';

const MiB = 2 ** 20;

/** Options that bound how many sessions the pool serves at once: a refusal names the one to raise. */
export type PooledCapacitySetting = 'min' | 'max' | 'maxSessions' | 'acquireTimeoutMs';

/** Resource limits of every pooled container (SECURITY.md, container settings). */
export interface PooledLimits {
  /** Container memory limit; swap is the same value, so none. Default 512 MiB. */
  memoryBytes: number;
  /** CPU quota in units of 1e-9 CPUs. Default 1e9 (one CPU). */
  nanoCpus: number;
  /** Container pids limit (processes + threads), 64–256. Default 128. */
  pids: number;
  /** Size of the `/tmp` tmpfs. Default 64 MiB. */
  tmpfsBytes: number;
  /** `nofile` ulimit. Default 256. */
  openFiles: number;
  /** `fsize` ulimit, largest file the code may write. Default 64 MiB. */
  fileSizeBytes: number;
}

/**
 * What `PooledTierModule.forRoot` accepts: option > default. The library reads no environment and no working
 * directory: the engine's configuration passes what it found there.
 */
export interface PooledOptions {
  /**
   * Sandbox image. Default: the tag in `imageTagFile`, read once at boot. Without either the tier reports itself
   * unavailable.
   */
  image?: string;
  /**
   * Absolute path of the file holding the image tag `npm run sandbox:image` writes, e.g.
   * `<engine dir>/.runtime/sandbox-image.tag`.
   */
  imageTagFile?: string;
  /**
   * Warm containers kept started and idle, ready to be claimed, however quiet it is: the pool's floor. After a burst
   * of claims it holds more (`demandWindowMs`). Default 2; 0: no warm pool (every claim waits for a start).
   */
  min?: number;
  /** Most warm containers (idle or starting) the pool holds at once. Default 16. */
  max?: number;
  /** Most warm containers starting at once. Default: the CPU cores, at least 2 and at most 8. */
  starts?: number;
  /**
   * How long a burst of claims keeps the pool above its floor: the pool holds `min` plus the most claims that came
   * within one container start time (at least a second) during the last `demandWindowMs` (at most `max`). Default 60 000.
   */
  demandWindowMs?: number;
  /**
   * Most containers held by sessions at once. A session beyond it is refused (retriable) until one is released.
   * Default 16. All containers together stay within `max + maxSessions`.
   */
  maxSessions?: number;
  /** How long a claim waits for a healthy warm container. Default 10 000. */
  acquireTimeoutMs?: number;
  /** How long the runner may take to answer a health check before its container counts as dead. Default 1000. */
  healthCheckTimeoutMs?: number;
  /** Create + start + runner greeting of one container. Default 20 000. */
  startTimeoutMs?: number;
  /** A warm container idle this long is replaced by a fresh one. Default 600 000 (10 min). */
  warmIdleTimeoutMs?: number;
  /** How often idle warm containers are checked for eviction. Default 10 000. */
  evictionIntervalMs?: number;
  /** A claimed container whose session ran nothing for this long is destroyed. Default 900 000 (15 min). */
  sessionIdleTimeoutMs?: number;
  /** Time past a run's own timeout before a silent runner counts as hung and its container is destroyed. Default 2000. */
  runnerGraceMs?: number;
  /**
   * Host directory under which each container gets an empty mount point, made a shared mount so that a session's
   * workspace bind-mounted there later shows up inside the container. Must be visible to the Docker daemon at the
   * same path. Default `<os.tmpdir()>/switchyard-pooled`.
   */
  mountRoot?: string;
  /** Value of the `dev.switchyard.engine` label. Default `<hostname>:<pid>:<process start ticks>`, which lets a later engine tell that this one is dead. */
  engineId?: string;
  /**
   * How operators set the pool's capacity options, named in refusals ("raise SWITCHYARD_POOL_MAX_SESSIONS"). Default
   * the option's own name (`pooled.maxSessions`).
   */
  settingNames?: Partial<Record<PooledCapacitySetting, string>>;
  limits?: Partial<PooledLimits>;
  /**
   * Host files or directories made visible read-only at the same path in every container (the operator's extra
   * trusted CAs). Must be visible to the Docker daemon at that path. Default none.
   */
  readOnlyBinds?: string[];
  /**
   * Directory of the containers' read-only /etc/hosts (`SandboxHostsFile`), one the Docker daemon sees at the same
   * path. Default: a private directory under the OS temp dir.
   */
  hostsDir?: string;
}

export interface ResolvedPooledOptions {
  image?: string;
  /** Where `image` came from, for operators. */
  imageSource: 'option' | 'tag-file' | 'none';
  min: number;
  max: number;
  starts: number;
  demandWindowMs: number;
  maxSessions: number;
  acquireTimeoutMs: number;
  healthCheckTimeoutMs: number;
  startTimeoutMs: number;
  warmIdleTimeoutMs: number;
  evictionIntervalMs: number;
  sessionIdleTimeoutMs: number;
  runnerGraceMs: number;
  mountRoot: string;
  engineId: string;
  settingNames: Record<PooledCapacitySetting, string>;
  limits: PooledLimits;
  readOnlyBinds: string[];
  hostsDir?: string;
}

/** Ranges of the pooled tier's own options the engine also sets; declared here only (the pool's capacity: `POOL_BOUNDS`). */
export const POOLED_BOUNDS = {
  sessionIdleTimeoutMs: { min: 1, max: 2 ** 31 - 1 },
} as const satisfies Record<string, Bounds>;

export const DEFAULT_POOLED_LIMITS: Readonly<PooledLimits> = Object.freeze({
  memoryBytes: 512 * MiB,
  nanoCpus: 1e9,
  pids: 128,
  tmpfsBytes: 64 * MiB,
  openFiles: 256,
  fileSizeBytes: 64 * MiB,
});

function imageFrom(options: PooledOptions): Pick<ResolvedPooledOptions, 'image' | 'imageSource'> {
  if (options.image !== undefined) return { image: options.image, imageSource: 'option' };
  if (options.imageTagFile !== undefined && !path.isAbsolute(options.imageTagFile)) {
    throw new SandboxConfigError('pooled.imageTagFile', 'must be an absolute path');
  }
  // No tag file (yet): the tier reports itself unavailable, naming the ways to configure one.
  const tag = options.imageTagFile === undefined ? undefined : readImageTag(options.imageTagFile);
  return tag === undefined
    ? { image: undefined, imageSource: 'none' }
    : { image: tag, imageSource: 'tag-file' };
}

/** Applies defaults and fails loudly, naming the option (`pooled.<name>`), on anything that cannot work. */
export function resolvePooledOptions(options: PooledOptions = {}): ResolvedPooledOptions {
  const limits: PooledLimits = { ...DEFAULT_POOLED_LIMITS, ...options.limits };
  const resolved: ResolvedPooledOptions = {
    ...imageFrom(options),
    min: options.min ?? 2,
    max: options.max ?? 16,
    starts: options.starts ?? defaultWarmStarts(),
    demandWindowMs: options.demandWindowMs ?? 60_000,
    maxSessions: options.maxSessions ?? 16,
    acquireTimeoutMs: options.acquireTimeoutMs ?? 10_000,
    healthCheckTimeoutMs: options.healthCheckTimeoutMs ?? 1000,
    startTimeoutMs: options.startTimeoutMs ?? 20_000,
    warmIdleTimeoutMs: options.warmIdleTimeoutMs ?? 600_000,
    evictionIntervalMs: options.evictionIntervalMs ?? 10_000,
    sessionIdleTimeoutMs: options.sessionIdleTimeoutMs ?? 900_000,
    runnerGraceMs: options.runnerGraceMs ?? 2000,
    mountRoot: options.mountRoot ?? path.join(os.tmpdir(), 'switchyard-pooled'),
    engineId: options.engineId ?? defaultEngineInstanceId(),
    settingNames: {
      min: 'pooled.min',
      max: 'pooled.max',
      maxSessions: 'pooled.maxSessions',
      acquireTimeoutMs: 'pooled.acquireTimeoutMs',
      ...options.settingNames,
    },
    limits,
    readOnlyBinds: checkedBinds(options.readOnlyBinds, 'pooled.readOnlyBinds'),
    ...(options.hostsDir !== undefined && {
      hostsDir: checkedBinds([options.hostsDir], 'pooled.hostsDir')[0],
    }),
  };
  const integers: IntegerOption[] = [
    ...(['min', 'max', 'maxSessions', 'acquireTimeoutMs'] as const).map((name): IntegerOption => [
      name,
      resolved[name],
      POOL_BOUNDS[name].min,
      POOL_BOUNDS[name].max,
    ]),
    ['starts', resolved.starts, POOL_BOUNDS.starts.min, POOL_BOUNDS.starts.max],
    [
      'demandWindowMs',
      resolved.demandWindowMs,
      POOL_BOUNDS.demandWindowMs.min,
      POOL_BOUNDS.demandWindowMs.max,
    ],
    ['healthCheckTimeoutMs', resolved.healthCheckTimeoutMs, 1, 600_000],
    ['startTimeoutMs', resolved.startTimeoutMs, 1, 600_000],
    ['warmIdleTimeoutMs', resolved.warmIdleTimeoutMs, 1, 2 ** 31 - 1],
    ['evictionIntervalMs', resolved.evictionIntervalMs, 1, 2 ** 31 - 1],
    [
      'sessionIdleTimeoutMs',
      resolved.sessionIdleTimeoutMs,
      POOLED_BOUNDS.sessionIdleTimeoutMs.min,
      POOLED_BOUNDS.sessionIdleTimeoutMs.max,
    ],
    ['runnerGraceMs', resolved.runnerGraceMs, 1, 600_000],
    [
      'limits.memoryBytes',
      limits.memoryBytes,
      CONTAINER_LIMIT_BOUNDS.memoryBytes.min,
      Number.MAX_SAFE_INTEGER,
    ],
    [
      'limits.nanoCpus',
      limits.nanoCpus,
      CONTAINER_LIMIT_BOUNDS.cpus.min * 1e9,
      CONTAINER_LIMIT_BOUNDS.cpus.max * 1e9,
    ],
    ['limits.pids', limits.pids, CONTAINER_LIMIT_BOUNDS.pids.min, CONTAINER_LIMIT_BOUNDS.pids.max],
    ['limits.tmpfsBytes', limits.tmpfsBytes, MiB, Number.MAX_SAFE_INTEGER],
    ['limits.openFiles', limits.openFiles, 16, 1 << 20],
    ['limits.fileSizeBytes', limits.fileSizeBytes, 1, Number.MAX_SAFE_INTEGER],
  ];
  checkIntegers(integers, 'pooled.');
  if (resolved.min > resolved.max) {
    throw new SandboxConfigError('pooled.min', `must not exceed pooled.max (${resolved.max})`);
  }
  if (resolved.image !== undefined && !/^[\w][\w.\-/:@]*$/.test(resolved.image)) {
    throw new SandboxConfigError('pooled.image', `not an image reference: ${JSON.stringify(resolved.image)}`);
  }
  if (!path.isAbsolute(resolved.mountRoot) || resolved.mountRoot.includes('\0')) {
    throw new SandboxConfigError('pooled.mountRoot', 'must be an absolute path');
  }
  if (path.resolve(resolved.mountRoot) === '/') {
    throw new SandboxConfigError('pooled.mountRoot', 'must not be /');
  }
  resolved.mountRoot = path.resolve(resolved.mountRoot);
  return resolved;
}
