import type { RunnerConnection } from '../../../core/runner/runner-connection';
import type { SessionEgressAccess } from '../../../core/sandbox.types';
import { type StatefulBox, StatefulBoxHost } from '../../../core/stateful/stateful-box.port';
import type { Lease, SessionLeases } from './session-leases';

/** A session's pooled container seen as the box of its kernels and processes (its runner starts them). */
class LeaseBox implements StatefulBox {
  readonly tier = 'pooled' as const;
  readonly interpreters = {};
  readonly closed: Promise<void>;

  constructor(
    readonly lease: Lease,
    private readonly leases: SessionLeases,
  ) {
    this.closed = lease.container.connection.closed;
  }

  get sessionId(): string {
    return this.lease.sessionId;
  }

  get containerId(): string {
    return this.lease.container.id;
  }

  get connection(): RunnerConnection {
    return this.lease.container.connection;
  }

  get relaySocket(): string | undefined {
    return this.lease.container.relaySocket;
  }

  /** The workspace mounted now: a remount (the session's directory was replaced) changes it. */
  get workspace(): [string, string] {
    return this.lease.workspace.id;
  }

  pin(): () => void {
    return this.leases.pin(this.lease);
  }
}

/**
 * The pooled tier's stateful boxes: the container a session holds (claimed by its first pooled action, kernel or
 * process), whose runner also starts the session's kernels and background processes beside fresh runs. They die
 * with the container (session end, a lost runner, shutdown); while any lives, the container is not freed for
 * idleness.
 */
export class PooledBoxes extends StatefulBoxHost {
  readonly tier = 'pooled' as const;
  private readonly boxes = new WeakMap<Lease, LeaseBox>();

  constructor(
    private readonly leases: SessionLeases,
    readonly memoryBytes: number,
  ) {
    super();
  }

  async box(
    sessionId: string,
    workspaceDir: string,
    egress?: SessionEgressAccess,
    image?: string,
  ): Promise<StatefulBox> {
    const lease = await this.leases.leaseFor({
      sessionId,
      workspaceDir,
      ...(egress && { egress }),
      ...(image !== undefined && { image }),
    });
    await this.leases.ensureWorkspace(lease, workspaceDir);
    return this.boxOf(lease);
  }

  existing(sessionId: string): StatefulBox | undefined {
    const lease = this.leases.current(sessionId);
    return lease && this.boxOf(lease);
  }

  private boxOf(lease: Lease): LeaseBox {
    let box = this.boxes.get(lease);
    if (!box) this.boxes.set(lease, (box = new LeaseBox(lease, this.leases)));
    return box;
  }

  async discard(box: StatefulBox): Promise<void> {
    if (box instanceof LeaseBox) await this.leases.retireAfterFailure(box.lease);
  }
}
