import { Injectable, Logger, type OnApplicationBootstrap, type OnApplicationShutdown } from '@nestjs/common';
import { ReplicaLeases } from './replica-leases';
import { ReplicaTakeover } from './replica-takeover';

/**
 * This replica's membership: registers at start-up (then takes over whatever dead replicas left), renews its lease
 * every third of it, looks for expired leases every half of it, and ends its lease at a clean stop. A replica that
 * finds its lease taken over (it stalled longer than the lease) stops itself with SIGTERM: another replica serves
 * its sessions now, and two must never run one session's actions.
 */
@Injectable()
export class ReplicaRegistry implements OnApplicationBootstrap, OnApplicationShutdown {
  private readonly logger = new Logger('ReplicaRegistry');
  private timers: NodeJS.Timeout[] = [];
  private scanning?: Promise<void>;
  private stopped = false;

  constructor(
    private readonly leases: ReplicaLeases,
    private readonly takeover: ReplicaTakeover,
  ) {}

  async onApplicationBootstrap(): Promise<void> {
    await this.leases.register();
    this.logger.log({ msg: 'replica registered', replica: this.leases.replicaId, url: this.leases.url });
    const renew = setInterval(() => void this.renew(), Math.floor(this.leases.leaseMs / 3));
    const scan = setInterval(() => void this.scan(), Math.floor(this.leases.leaseMs / 2));
    renew.unref();
    scan.unref();
    this.timers = [renew, scan];
    await this.scan();
  }

  async onApplicationShutdown(): Promise<void> {
    this.stopped = true;
    for (const t of this.timers) clearInterval(t);
    await this.scanning;
    await this.leases.release().catch((err: unknown) => {
      this.logger.warn({ msg: 'cannot end this replica lease (it runs out by itself)', err: String(err) });
    });
  }

  /** Takes over every replica whose lease ran out (one look at a time). */
  scan(): Promise<void> {
    this.scanning ??= this.scanOnce().finally(() => (this.scanning = undefined));
    return this.scanning;
  }

  private async scanOnce(): Promise<void> {
    try {
      for (const replica of await this.leases.expired()) {
        if (this.stopped) return;
        await this.takeover.takeOver(replica);
      }
    } catch (err) {
      this.logger.warn({ msg: 'cannot look for replicas whose lease ran out', err: String(err) });
    }
  }

  private async renew(): Promise<void> {
    if (this.stopped) return;
    try {
      if (await this.leases.renew()) return;
      this.stopped = true;
      this.logger.error({
        msg: 'this replica was taken over (its lease ran out): stopping, another replica serves its sessions',
        replica: this.leases.replicaId,
      });
      process.kill(process.pid, 'SIGTERM');
    } catch (err) {
      this.logger.warn({ msg: 'cannot renew this replica lease', err: String(err) });
    }
  }
}
