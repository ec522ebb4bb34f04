import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import type { TierAvailability } from '../sandbox.types';
import { currentImage, type ResolvedContainerOptions } from './container.options';
import type { DockerClient } from './docker-client';
import { dockerUnreachable, SANDBOX_IMAGE_MISSING } from './docker-availability';
import { DockerTimeoutError, DockerUnavailableError } from './docker.errors';

/** An availability answer and, when available, the image runs use. */
export interface ContainerAvailabilityEntry {
  /** When it was probed (`clock.monotonic()`). */
  at: number;
  value: TierAvailability;
  image?: string;
}

/**
 * Whether the one-off tier can run: Docker ping plus "the image exists", each answer reused for
 * `availabilityCacheMs`, so the tier notices by itself when Docker comes back or the image gets built. Concurrent
 * callers share one probe; transitions are logged once.
 */
export class ContainerAvailability {
  private cached?: ContainerAvailabilityEntry;
  private probing?: Promise<ContainerAvailabilityEntry>;
  private wasAvailable?: boolean;
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
      await this.docker.ping(call);
    } catch (err) {
      const { code, reason } = dockerUnreachable(endpoint, err);
      return unavailable(code, reason);
    }
    const image = currentImage(this.options);
    if (!image) return unavailable(SANDBOX_IMAGE_MISSING, noImageReason(this.options));
    try {
      if (!(await this.docker.imageExists(image, call))) {
        return unavailable(
          SANDBOX_IMAGE_MISSING,
          `sandbox image ${image} is not in the Docker engine at ${endpoint}; build it with \`npm run sandbox:image\``,
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
      value: {
        available: true,
        details: {
          endpoint,
          image,
          engineInstanceId: this.options.engineInstanceId,
          limits: this.options.limits,
        },
      },
    };
  }

  private reportTransition(value: TierAvailability): void {
    if (value.available === this.wasAvailable) return;
    if (value.available) this.logger.log(`container tier available (${String(value.details?.image)})`);
    else this.logger.warn(`container tier unavailable: ${value.reason}`);
    this.wasAvailable = value.available;
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
