import type { Logger } from '@nestjs/common';

/**
 * Cleanups running in the background (a cgroup removal, a container teardown): each is logged if it fails, and
 * shutdown waits for all of them, including any started while it waits.
 */
export class PendingCleanups {
  private readonly pending = new Set<Promise<unknown>>();

  constructor(
    private readonly logger: Logger,
    /** How the failure message starts, e.g. `cleanup`. */
    private readonly what = 'cleanup',
  ) {}

  track(cleanup: Promise<unknown>): void {
    const tracked = cleanup.catch((err: unknown) =>
      this.logger.warn(`${this.what} failed: ${(err as Error).message}`),
    );
    this.pending.add(tracked);
    void tracked.finally(() => this.pending.delete(tracked));
  }

  /** Settles once nothing is pending. Never rejects. */
  async drain(): Promise<void> {
    while (this.pending.size > 0) await Promise.allSettled([...this.pending]);
  }
}
