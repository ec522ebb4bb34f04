import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import type { TierAvailability } from '../../core/sandbox.types';
import { currentImage, type ResolvedContainerOptions } from './container.options';
import type { DockerClient, DockerRuntimes } from './docker-client';
import {
  CONTAINER_RUNTIME_UNAVAILABLE,
  dockerUnreachable,
  pingForAvailability,
  SANDBOX_IMAGE_MISSING,
} from './docker-availability';
import { DockerTimeoutError, DockerUnavailableError } from './docker.errors';

/** How long the Docker engine's list of runtimes is reused: it changes only when the daemon is reconfigured. */
const RUNTIMES_CACHE_MS = 30_000;

/** An availability answer and, when available, the image and the Docker runtime runs use. */
export interface ContainerAvailabilityEntry {
  /** When it was probed (`clock.monotonic()`). */
  at: number;
  value: TierAvailability;
  image?: string;
  /** `runsc`, `runc`, …: what `HostConfig.Runtime` of the tier's containers says. */
  runtime?: string;
}

/**
 * The runtime the setting asks for on an engine with these runtimes, or why there is none. `auto` takes gVisor when
 * the engine has it, else the engine's default; an explicit choice the engine lacks is never replaced by another.
 */
export function chooseRuntime(
  options: Pick<ResolvedContainerOptions, 'runtime' | 'runtimeSetting'>,
  engine: DockerRuntimes,
  endpoint: string,
): { runtime: string } | { reason: string } {
  if (options.runtime === 'auto') {
    return { runtime: engine.names.includes('runsc') ? 'runsc' : engine.defaultRuntime };
  }
  if (engine.names.includes(options.runtime)) return { runtime: options.runtime };
  const fix =
    options.runtime === 'runsc'
      ? 'install gVisor and register it with `npm run docker:engine` (as root; see docker/README.md), or set ' +
        `${options.runtimeSetting}=auto`
      : `set ${options.runtimeSetting}=auto`;
  return {
    reason:
      `${options.runtimeSetting}=${options.runtime}, but the Docker engine at ${endpoint} has no ` +
      `${options.runtime} runtime (it has: ${engine.names.join(', ') || 'none'}); ${fix}`,
  };
}

/**
 * Whether the one-off tier can run: Docker ping plus "the image exists", each answer reused for
 * `availabilityCacheMs`, so the tier notices by itself when Docker comes back or the image gets built. Concurrent
 * callers share one probe; transitions are logged once.
 */
export class ContainerAvailability {
  private cached?: ContainerAvailabilityEntry;
  private probing?: Promise<ContainerAvailabilityEntry>;
  private engineRuntimes?: { at: number; value: DockerRuntimes };
  private wasAvailable?: boolean;
  private lastRuntime?: string;
  private closed = false;

  constructor(
    private readonly docker: DockerClient,
    private readonly options: ResolvedContainerOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** The latest probe found the tier available (Docker answered). */
  get lastAvailable(): boolean {
    return this.wasAvailable === true;
  }

  /** Never throws. */
  current(): Promise<ContainerAvailabilityEntry> {
    if (this.closed) {
      return Promise.resolve({ at: 0, value: { available: false, reason: 'the engine is shutting down' } });
    }
    const cached = this.cached;
    if (cached && this.clock.monotonic() - cached.at < this.options.availabilityCacheMs)
      return Promise.resolve(cached);
    this.probing ??= this.probe()
      .then((entry) => {
        this.cached = entry;
        this.reportTransition(entry.value);
        return entry;
      })
      .finally(() => (this.probing = undefined));
    return this.probing;
  }

  /** Docker did something wrong: the next check asks it again instead of trusting the cache. */
  forget(): void {
    this.cached = undefined;
    this.engineRuntimes = undefined;
  }

  /** From now on the tier is unavailable: the engine is shutting down. */
  close(): void {
    this.closed = true;
  }

  private async probe(): Promise<ContainerAvailabilityEntry> {
    const call = { timeoutMs: this.options.probeTimeoutMs };
    const endpoint = this.docker.endpoint;
    const unavailable = (code: string, reason: string): ContainerAvailabilityEntry => ({
      at: this.clock.monotonic(),
      value: { available: false, code, reason, details: { endpoint } },
    });
    try {
      await pingForAvailability(this.docker, call.timeoutMs, this.wasAvailable === true);
    } catch (err) {
      // A daemon that went away may come back with other runtimes.
      this.engineRuntimes = undefined;
      const { code, reason } = dockerUnreachable(endpoint, err);
      return unavailable(code, reason);
    }
    let runtime: string;
    try {
      const chosen = chooseRuntime(this.options, await this.runtimesOf(call), endpoint);
      if ('reason' in chosen) return unavailable(CONTAINER_RUNTIME_UNAVAILABLE, chosen.reason);
      runtime = chosen.runtime;
    } catch (err) {
      if (err instanceof DockerUnavailableError || err instanceof DockerTimeoutError) {
        const { code, reason } = dockerUnreachable(endpoint, err);
        return unavailable(code, reason);
      }
      return unavailable(
        CONTAINER_RUNTIME_UNAVAILABLE,
        `cannot list the Docker engine's runtimes (${this.options.runtimeSetting}=${this.options.runtime}): ` +
          (err as Error).message,
      );
    }
    const withRuntime = (entry: ContainerAvailabilityEntry): ContainerAvailabilityEntry => ({
      ...entry,
      value: { ...entry.value, details: { ...entry.value.details, runtime } },
    });
    const image = currentImage(this.options);
    if (!image) return withRuntime(unavailable(SANDBOX_IMAGE_MISSING, noImageReason(this.options)));
    try {
      if (!(await this.docker.imageExists(image, call))) {
        return withRuntime(
          unavailable(
            SANDBOX_IMAGE_MISSING,
            `sandbox image ${image} is not in the Docker engine at ${endpoint}; build it with \`npm run sandbox:image\``,
          ),
        );
      }
    } catch (err) {
      if (err instanceof DockerUnavailableError || err instanceof DockerTimeoutError) {
        const { code, reason } = dockerUnreachable(endpoint, err);
        return unavailable(code, reason);
      }
      return unavailable(
        'SANDBOX_IMAGE_UNCHECKED',
        `cannot check the sandbox image ${image}: ${(err as Error).message}`,
      );
    }
    return {
      at: this.clock.monotonic(),
      image,
      runtime,
      value: {
        available: true,
        details: {
          endpoint,
          image,
          runtime,
          engineInstanceId: this.options.engineInstanceId,
          limits: this.options.limits,
        },
      },
    };
  }

  /** The engine's runtimes, asked again every `RUNTIMES_CACHE_MS` and after Docker failed. */
  private async runtimesOf(call: { timeoutMs: number }): Promise<DockerRuntimes> {
    const now = this.clock.monotonic();
    const known = this.engineRuntimes;
    if (known && now - known.at < RUNTIMES_CACHE_MS) return known.value;
    const value = await this.docker.runtimes(call);
    this.engineRuntimes = { at: now, value };
    return value;
  }

  private reportTransition(value: TierAvailability): void {
    const runtime = value.details?.runtime as string | undefined;
    if (value.available === this.wasAvailable && (!value.available || runtime === this.lastRuntime)) return;
    if (value.available) {
      this.logger.log(
        `container tier available (${String(value.details?.image)}, runtime ${runtime}${runtime === 'runsc' ? ': gVisor' : ''})`,
      );
    } else this.logger.warn(`container tier unavailable: ${value.reason}`);
    this.wasAvailable = value.available;
    if (value.available) this.lastRuntime = runtime;
  }
}

function noImageReason(options: ResolvedContainerOptions): string {
  const where = options.imageTagFile
    ? `${options.imageTagFile} is missing`
    : 'neither container.image nor container.imageTagFile is set';
  return (
    `no sandbox image configured: ${where}; ` +
    'build the image with `npm run sandbox:image` (or set SWITCHYARD_SANDBOX_IMAGE)'
  );
}
