import * as path from 'node:path';
import type { Language } from '@switchyard/common';
import { SandboxConfigError } from '../../core/sandbox.errors';
import { defaultEngineInstanceId } from '../../core/engine-instance';
import { readImageTag } from '../../core/sandbox-image';
import { checkIntegers, type IntegerOption } from '../../core/integer-options';
import { CONTAINER_LIMIT_BOUNDS } from '../../core/container-bounds';

const MiB = 1024 * 1024;

/**
 * How the one-off tier picks its Docker runtime: `runsc` (gVisor: the code talks to gVisor's kernel, never the
 * host's), `runc`, or `auto`: `runsc` when the Docker engine has a runtime of that name, else the engine's default.
 */
export const CONTAINER_RUNTIME_SETTINGS = ['auto', 'runsc', 'runc'] as const;
export type ContainerRuntimeSetting = (typeof CONTAINER_RUNTIME_SETTINGS)[number];

/** One-off containers started ahead (`AheadContainers`). */
export interface AheadOptions {
  /** Most containers started ahead at once, over all sessions; 0: none. */
  max: number;
  /** One not taken within this long is removed. */
  idleMs: number;
}

/** Resource limits of each one-off container. */
export interface ContainerLimits {
  /** Memory cgroup limit; `MemorySwap` is set to the same value, so there is no swap. Default 512 MiB. */
  memoryBytes: number;
  /** CPU quota in billionths of a CPU (`NanoCpus`). Default 1e9: one CPU. */
  nanoCpus: number;
  /** `PidsLimit`: processes plus threads. SECURITY.md asks for 64–256; anything else fails at boot. Default 128. */
  pids: number;
  /** Size of the `/tmp` tmpfs, and of `/dev/shm`. Both are charged to the memory limit. Default 64 MiB. */
  tmpfsBytes: number;
  /** `nofile` ulimit (open files). Default 256. */
  nofile: number;
  /** `fsize` ulimit in bytes: largest file the code may write (SIGXFSZ past it). Default 64 MiB. */
  fsizeBytes: number;
}

/**
 * Options of the one-off container tier (`ContainerModule.forRoot`). Everything is optional. The library reads no
 * environment and no working directory: the engine's configuration passes what it found there.
 *
 * Image precedence: `image` > the tag in `imageTagFile` (written by `npm run sandbox:image`). With neither, the tier
 * reports itself unavailable.
 */
export interface ContainerTierOptions {
  /** Image reference, e.g. `switchyard/sandbox:5b16bcc01d30`. */
  image?: string;
  /**
   * Absolute path of the file holding the image tag, e.g. `<engine dir>/.runtime/sandbox-image.tag`. Re-read by
   * every availability probe until it names an image, so building the image later needs no restart.
   */
  imageTagFile?: string;
  limits?: Partial<ContainerLimits>;
  /**
   * Value of the `dev.switchyard.engine` label on this engine's containers. Default `<hostname>:<pid>:<start ticks>`
   * (the same default as the pooled tier's `engineId`), unique per engine process and checkable for liveness on
   * the same host.
   */
  engineInstanceId?: string;
  /** `uid:gid` the code runs as; never root. Default `10001:10001`, the image's `sandbox` user. */
  user?: string;
  /** Interpreter paths inside the image. Defaults `/usr/bin/python3`, `/usr/bin/node`, `/bin/bash`. */
  interpreters?: Partial<Record<Language, string>>;
  /**
   * Docker runtime of the one-off containers (see `ContainerRuntimeSetting`). Default `auto`. An explicit `runsc` the
   * Docker engine does not have makes the tier unavailable: it is never silently replaced by runc.
   */
  runtime?: ContainerRuntimeSetting;
  /** The setting `runtime` came from, named in messages (e.g. `SWITCHYARD_CONTAINER_RUNTIME`). Default `container.runtime`. */
  runtimeSetting?: string;
  /** How long an availability answer (Docker ping + image check) is reused. Default 2000 ms. */
  availabilityCacheMs?: number;
  /** Deadline of the availability probe's Docker calls. Default 3000 ms. */
  probeTimeoutMs?: number;
  /** Remove leftover one-off containers of other (dead) engine instances at start-up. Default true. */
  reapOnStart?: boolean;
  /**
   * Whether a session is live, for the reaper: containers of live sessions are left alone. Default: no session is
   * live, which is right for one engine per Docker daemon; engines sharing a daemon must pass one.
   */
  isSessionLive?: (sessionId: string) => boolean | Promise<boolean>;
  /**
   * Host files or directories made visible read-only at the same path in every container (the operator's extra
   * trusted CAs). Must be visible to the Docker daemon at that path. Default none.
   */
  readOnlyBinds?: string[];
  /**
   * Directory of the host where the tier keeps its containers' read-only /etc/hosts (see `SandboxHostsFile`). Must be
   * visible to the Docker daemon at that path. Default: a private directory under the OS temp dir, removed at shutdown.
   */
  hostsDir?: string;
  /**
   * Containers started ahead (`AheadContainers`): after a session's run, its next container is started with the same
   * settings and waits for the code. `max`: most held at once over all sessions (0: none; default 4); `idleMs`: one not
   * taken within this long is removed (default 60 000).
   */
  ahead?: Partial<AheadOptions>;
}

export interface ResolvedContainerOptions {
  /** Fixed image, when given; otherwise read from `imageTagFile`. */
  image?: string;
  imageTagFile?: string;
  limits: ContainerLimits;
  engineInstanceId: string;
  user: string;
  interpreters: Record<Language, string>;
  runtime: ContainerRuntimeSetting;
  runtimeSetting: string;
  availabilityCacheMs: number;
  probeTimeoutMs: number;
  reapOnStart: boolean;
  isSessionLive: (sessionId: string) => boolean | Promise<boolean>;
  readOnlyBinds: string[];
  hostsDir?: string;
  ahead: AheadOptions;
}

export const DEFAULT_CONTAINER_LIMITS: Readonly<ContainerLimits> = Object.freeze({
  memoryBytes: 512 * MiB,
  nanoCpus: 1e9,
  pids: 128,
  tmpfsBytes: 64 * MiB,
  nofile: 256,
  fsizeBytes: 64 * MiB,
});

export const DEFAULT_AHEAD: Readonly<AheadOptions> = Object.freeze({ max: 4, idleMs: 60_000 });
/** What `ahead` may be set to. */
export const AHEAD_BOUNDS = {
  max: { min: 0, max: 64 },
  idleMs: { min: 1000, max: 3_600_000 },
} as const;

const IMAGE_REF = /^[a-z0-9][a-z0-9._\-/:@]*$/i;
const LABEL_VALUE = /^[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}$/;
const USER = /^(\d+)(?::(\d+))?$/;

/** Absolute host paths, each once; anything else fails naming the option. */
export function checkedBinds(paths: readonly string[] | undefined, option: string): string[] {
  const unique = [...new Set(paths ?? [])];
  unique.forEach((p, i) => {
    if (!path.isAbsolute(p) || p.includes(':') || p.includes(',')) {
      throw new SandboxConfigError(`${option}[${i}]`, 'must be an absolute path without ":" or ","');
    }
  });
  return unique;
}

/** Applies defaults and fails loudly, naming the option (`container.*`), on anything that cannot work. */
export function resolveContainerOptions(options: ContainerTierOptions = {}): ResolvedContainerOptions {
  const limits: ContainerLimits = { ...DEFAULT_CONTAINER_LIMITS, ...definedOnly(options.limits ?? {}) };
  const resolved: ResolvedContainerOptions = {
    image: options.image,
    imageTagFile: options.imageTagFile,
    limits,
    engineInstanceId: options.engineInstanceId ?? defaultEngineInstanceId(),
    user: options.user ?? '10001:10001',
    interpreters: {
      python: options.interpreters?.python ?? '/usr/bin/python3',
      node: options.interpreters?.node ?? '/usr/bin/node',
      bash: options.interpreters?.bash ?? '/bin/bash',
    },
    runtime: options.runtime ?? 'auto',
    runtimeSetting: options.runtimeSetting ?? 'container.runtime',
    availabilityCacheMs: options.availabilityCacheMs ?? 2000,
    probeTimeoutMs: options.probeTimeoutMs ?? 3000,
    reapOnStart: options.reapOnStart ?? true,
    isSessionLive: options.isSessionLive ?? (() => false),
    readOnlyBinds: checkedBinds(options.readOnlyBinds, 'container.readOnlyBinds'),
    ahead: {
      max: options.ahead?.max ?? DEFAULT_AHEAD.max,
      idleMs: options.ahead?.idleMs ?? DEFAULT_AHEAD.idleMs,
    },
    ...(options.hostsDir !== undefined && {
      hostsDir: checkedBinds([options.hostsDir], 'container.hostsDir')[0],
    }),
  };

  checkIntegers(
    Object.entries(limits).map(([name, value]): IntegerOption => [`limits.${name}`, value, 1]),
    'container.',
  );
  const { pids, memoryBytes, cpus } = CONTAINER_LIMIT_BOUNDS;
  if (limits.pids < pids.min || limits.pids > pids.max) {
    throw new SandboxConfigError(
      'container.limits.pids',
      `must be from ${pids.min} to ${pids.max} (SECURITY.md), got ${limits.pids}`,
    );
  }
  if (limits.memoryBytes < memoryBytes.min) {
    throw new SandboxConfigError(
      'container.limits.memoryBytes',
      `must be at least ${memoryBytes.min / MiB} MiB`,
    );
  }
  // Only the floor: a one-off container's CPU quota has never had a ceiling here.
  if (limits.nanoCpus < cpus.min * 1e9) {
    throw new SandboxConfigError(
      'container.limits.nanoCpus',
      `must be at least ${(cpus.min * 1e9).toExponential().replace('e+', 'e')} (${cpus.min} CPU)`,
    );
  }
  checkIntegers(
    [
      ['availabilityCacheMs', resolved.availabilityCacheMs, 0],
      ['probeTimeoutMs', resolved.probeTimeoutMs, 0],
      ['ahead.max', resolved.ahead.max, AHEAD_BOUNDS.max.min, AHEAD_BOUNDS.max.max],
      ['ahead.idleMs', resolved.ahead.idleMs, AHEAD_BOUNDS.idleMs.min, AHEAD_BOUNDS.idleMs.max],
    ],
    'container.',
  );
  if (resolved.image !== undefined && !IMAGE_REF.test(resolved.image)) {
    throw new SandboxConfigError(
      'container.image',
      `not an image reference: ${JSON.stringify(resolved.image)}`,
    );
  }
  if (resolved.imageTagFile !== undefined && !path.isAbsolute(resolved.imageTagFile)) {
    throw new SandboxConfigError('container.imageTagFile', 'must be an absolute path');
  }
  if (!(CONTAINER_RUNTIME_SETTINGS as readonly string[]).includes(resolved.runtime)) {
    throw new SandboxConfigError(
      'container.runtime',
      `must be one of ${CONTAINER_RUNTIME_SETTINGS.join(', ')}, got ${JSON.stringify(resolved.runtime)}`,
    );
  }
  if (!LABEL_VALUE.test(resolved.engineInstanceId)) {
    throw new SandboxConfigError(
      'container.engineInstanceId',
      'must be 1–128 characters of letters, digits, "_", ".", ":" or "-"',
    );
  }
  const user = USER.exec(resolved.user);
  if (!user) throw new SandboxConfigError('container.user', 'must be "uid" or "uid:gid" in numbers');
  if (Number(user[1]) === 0 || Number(user[2] ?? user[1]) === 0) {
    throw new SandboxConfigError('container.user', 'must not be root (uid or gid 0)');
  }
  for (const [language, p] of Object.entries(resolved.interpreters)) {
    if (!p.startsWith('/'))
      throw new SandboxConfigError(`container.interpreters.${language}`, 'must be an absolute path');
  }
  return resolved;
}

/**
 * The image to run: the fixed one, else the tag in `imageTagFile`; `undefined` when neither exists yet.
 * Reads the file each time (it is tiny), so a rebuilt image is picked up.
 */
export function currentImage(
  options: Pick<ResolvedContainerOptions, 'image' | 'imageTagFile'>,
): string | undefined {
  if (options.image) return options.image;
  const tag = options.imageTagFile === undefined ? undefined : readImageTag(options.imageTagFile);
  return tag !== undefined && IMAGE_REF.test(tag) ? tag : undefined;
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}
