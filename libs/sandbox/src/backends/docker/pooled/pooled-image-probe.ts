import type { Clock } from '@switchyard/common';
import { dockerUnreachable, pingForAvailability, SANDBOX_IMAGE_MISSING } from '../docker-availability';
import type { DockerClient } from '../docker-client';
import type { TierAvailability } from '../../../core/sandbox.types';
import type { ResolvedPooledOptions } from './pooled.options';

const PING_TIMEOUT_MS = 2000;
const IMAGE_CHECK_TTL_MS = 30_000;

/**
 * What the pooled tier needs from the host before anything else: a configured image, root (it bind-mounts
 * workspaces on the host), a Docker engine that answers and has the image. An image once seen is trusted for
 * `IMAGE_CHECK_TTL_MS`.
 */
export class PooledImageProbe {
  private imageSeen?: { image: string; at: number };
  /** Docker answered the latest ping. */
  private answered = false;

  constructor(
    private readonly options: ResolvedPooledOptions,
    private readonly docker: DockerClient,
    private readonly clock: Clock,
  ) {}

  /** Why the tier cannot run, or `undefined` when it can. Never throws. */
  async problem(): Promise<TierAvailability | undefined> {
    const image = this.options.image;
    if (!image) {
      return {
        available: false,
        code: SANDBOX_IMAGE_MISSING,
        reason:
          'no sandbox image configured: set pooled.image or SWITCHYARD_SANDBOX_IMAGE, or build one with ' +
          '`npm run sandbox:image` (writes .runtime/sandbox-image.tag)',
      };
    }
    if (process.getuid?.() !== 0) {
      return {
        available: false,
        reason: 'the pooled tier bind-mounts workspaces on the host and must run as root',
      };
    }
    try {
      await pingForAvailability(this.docker, PING_TIMEOUT_MS, this.answered);
      this.answered = true;
    } catch (err) {
      this.answered = false;
      return { available: false, ...dockerUnreachable(this.docker.endpoint, err) };
    }
    try {
      if (!(await this.imageExists(image))) {
        return {
          available: false,
          code: SANDBOX_IMAGE_MISSING,
          reason: `sandbox image ${image} not found; build it with \`npm run sandbox:image\``,
        };
      }
    } catch (err) {
      return { available: false, reason: (err as Error).message };
    }
    return undefined;
  }

  private async imageExists(image: string): Promise<boolean> {
    const seen = this.imageSeen;
    if (seen?.image === image && this.clock.monotonic() - seen.at < IMAGE_CHECK_TTL_MS) return true;
    const exists = await this.docker.imageExists(image);
    if (exists) this.imageSeen = { image, at: this.clock.monotonic() };
    return exists;
  }
}
