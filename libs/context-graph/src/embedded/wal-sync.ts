import { open, type FileHandle } from 'node:fs/promises';

/**
 * Durability for a WAL-mode SQLite file without blocking the event loop.
 *
 * With `synchronous=NORMAL` in WAL mode, COMMIT appends to the `-wal` file without fsync (SQLite still syncs
 * the WAL before every checkpoint). An fdatasync of the `-wal` file after COMMIT then gives exactly what
 * `synchronous=FULL` gives — every acknowledged transaction is on disk — but it runs on libuv's thread pool,
 * so the engine keeps serving (and batching the next transaction) while the disk works.
 *
 * Concurrent callers share syncs: a caller arriving while one is in flight waits for the next one, which
 * starts after its own COMMIT and so covers it.
 */
export class WalSync {
  private handle: FileHandle | undefined;
  private inFlight: Promise<void> | undefined;
  private next: Promise<void> | undefined;

  constructor(private readonly walPath: string) {}

  /** Opens the `-wal` file; call after WAL mode is on and a first transaction has created it. */
  async open(): Promise<void> {
    this.handle ??= await open(this.walPath, 'r');
  }

  sync(): Promise<void> {
    if (!this.inFlight) {
      const handle = this.handle;
      if (!handle) return Promise.reject(new Error('WAL sync used before open() or after close()'));
      this.inFlight = handle.datasync().finally(() => (this.inFlight = undefined));
      return this.inFlight;
    }
    // The running sync may have started before our COMMIT: chain one more, shared by everyone who arrives now.
    this.next ??= this.inFlight.then(
      () => ((this.next = undefined), this.sync()),
      () => ((this.next = undefined), this.sync()),
    );
    return this.next;
  }

  async close(): Promise<void> {
    await this.inFlight?.catch(() => undefined);
    await this.next?.catch(() => undefined);
    const handle = this.handle;
    this.handle = undefined;
    await handle?.close();
  }
}
