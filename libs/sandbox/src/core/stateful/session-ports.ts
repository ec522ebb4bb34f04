import type { Duplex } from 'node:stream';
import { type ErrorKind, InvalidInputError, TIERS } from '@switchyard/common';
import { RunnerRefusedError } from '../runner/runner.errors';
import { dialRelay, RelayUnavailableError } from '../runner/runner-relay';
import { SandboxError } from '../sandbox.errors';
import { formatPortRanges, portAllowed, type ResolvedPortsOptions } from './ports.options';
import type { StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type { StatefulTier } from './stateful.types';

/**
 * Nothing answers on the session's port: the session has no sandbox running (no box holds its state), or nothing
 * listens there. The HTTP edge answers 502: the engine is a gateway to the session's server, which is not there.
 */
export class PortClosedError extends SandboxError {
  readonly code = 'PORT_CLOSED';
  readonly kind: ErrorKind = 'bad_gateway';
  override readonly retriable = true;
}

/** The engine does not open sessions' ports (SWITCHYARD_PORTS_ENABLED=false). */
export class PortsDisabledError extends SandboxError {
  readonly code = 'PORTS_DISABLED';
  readonly kind: ErrorKind = 'forbidden';
}

/** A port as the caller reaches it: the stream, the tier of the box it is in, and who listens there when known. */
export interface SessionPortConnection {
  /** Bytes to and from the server; `end()` half-closes, `destroy()` closes the connection. */
  stream: Duplex;
  tier: StatefulTier;
  /** The session's background process (`prc_…`) whose process tree holds the listening socket, when known. */
  proc: string | null;
  /** The session's kernel (`krn_…`) whose process tree holds it, when known. */
  kernel: string | null;
}

/** A port something listens on in one of the session's sandboxes. */
export interface SessionListeningPort {
  port: number;
  /** The address it is bound to: `127.0.0.1`, `0.0.0.0`, `::`… */
  address: string;
  tier: StatefulTier;
  proc: string | null;
  kernel: string | null;
}

const rank = (tier: StatefulTier): number => TIERS.indexOf(tier);

/**
 * A session's TCP ports, as the engine reaches them for callers (the HTTP proxy, a browser action opening
 * `localhost:PORT`): a connection to 127.0.0.1:PORT inside the session's sandbox, through its runner (a tunnel over
 * the runner's connection), so no box ever gets a network route in, on any backend. Only boxes that exist are tried:
 * reaching a port never claims a container or starts a sandbox, since a server can only be where the session already
 * runs something. The box holding the session's running kernels or processes is tried first (the strongest tier
 * first, where the session's later actions run: see `stateFloor`), then any other box the session has.
 */
export class SessionPorts {
  private readonly hosts: StatefulBoxHost[];

  constructor(
    hosts: StatefulBoxHost[],
    /** Tiers in which the session holds a running kernel or background process. */
    private readonly liveTiers: (sessionId: string) => StatefulTier[],
    private readonly options: ResolvedPortsOptions,
  ) {
    this.hosts = [...hosts].sort((a, b) => rank(b.tier) - rank(a.tier));
  }

  /** Whether sessions' ports may be opened at all. */
  get enabled(): boolean {
    return this.options.enabled;
  }

  /**
   * Refuses a port the engine does not open: ports disabled (`PortsDisabledError`), not a TCP port or outside the
   * allowed ranges (`InvalidInputError` naming `port`).
   */
  check(port: number): void {
    if (!this.options.enabled) {
      throw new PortsDisabledError(
        `sessions' ports are not opened by this engine (${this.options.settingNames.enabled}=false)`,
      );
    }
    if (!Number.isInteger(port) || port < 1 || port > 65535) {
      throw new InvalidInputError('port', 'must be a TCP port, an integer from 1 to 65535', 'INVALID_PORT');
    }
    if (!portAllowed(this.options.allowed, port)) {
      const allowed = formatPortRanges(this.options.allowed) || 'none';
      throw new InvalidInputError(
        'port',
        `port ${port} may not be opened: the allowed ports are ${allowed} (${this.options.settingNames.allowed})`,
        'PORT_NOT_ALLOWED',
        { allowed },
      );
    }
  }

  /**
   * The session's port as a stream (see the class). Throws what `check` throws, and `PortClosedError` when the
   * session has no sandbox or nothing listens on the port in any of them. The box stays pinned (not reclaimed for
   * idleness) while the stream is open.
   */
  async connect(sessionId: string, port: number): Promise<SessionPortConnection> {
    this.check(port);
    const boxes = this.boxes(sessionId);
    if (boxes.length === 0) {
      throw new PortClosedError(
        `nothing listens on port ${port}: session ${sessionId} has no sandbox running (start the server with a ` +
          '`process` action)',
        { port },
      );
    }
    const refusals: string[] = [];
    for (const box of boxes) {
      let opened: Omit<SessionPortConnection, 'tier'>;
      try {
        opened = await open(box, port);
      } catch (err) {
        // Refused (nothing listens), or the runner is gone: the next box may still have it.
        refusals.push(`${box.tier}: ${refusalWords(err)}`);
        continue;
      }
      const unpin = box.pin();
      opened.stream.once('close', unpin);
      return { ...opened, tier: box.tier };
    }
    throw new PortClosedError(
      `nothing listens on port ${port} in session ${sessionId}'s sandbox (${refusals.join('; ')})`,
      { port },
    );
  }

  /** The ports something listens on in the session's sandboxes (none when it has no sandbox running). */
  async list(sessionId: string): Promise<SessionListeningPort[]> {
    const lists = await Promise.all(
      this.boxes(sessionId).map(async (box) => {
        // A runner that is gone has nothing listening any more.
        const ports = await box.connection.listPorts().catch(() => []);
        return ports.map((p): SessionListeningPort => ({
          port: p.port,
          address: p.address,
          tier: box.tier,
          proc: p.proc ?? null,
          kernel: p.kernel ?? null,
        }));
      }),
    );
    return lists.flat().sort((a, b) => a.port - b.port || a.address.localeCompare(b.address));
  }

  /** The session's boxes that exist now, those holding its running state first (strongest tier first). */
  private boxes(sessionId: string): StatefulBox[] {
    const live = new Set(this.liveTiers(sessionId));
    const found = this.hosts.flatMap((host) => {
      const box = host.existing(sessionId);
      return box ? [box] : [];
    });
    return [...found.filter((b) => live.has(b.tier)), ...found.filter((b) => !live.has(b.tier))];
  }
}

/**
 * A connection to `port` in `box`: raw bytes through its runner's relay socket where it has one (a pooled
 * container), else a tunnel over the runner's connection (a bubblewrap box, a Kubernetes pod, a runner without a
 * relay). A relay that cannot be used falls back to the tunnel; a refusal by the runner through either is final.
 */
async function open(box: StatefulBox, port: number): Promise<Omit<SessionPortConnection, 'tier'>> {
  if (box.relaySocket !== undefined) {
    try {
      const { socket, proc, kernel } = await dialRelay(box.relaySocket, port);
      return { stream: socket, proc, kernel };
    } catch (err) {
      if (!(err instanceof RelayUnavailableError)) throw err;
    }
  }
  const tunnel = await box.connection.openTunnel(port);
  return { stream: tunnel, proc: tunnel.proc, kernel: tunnel.kernel };
}

function refusalWords(err: unknown): string {
  if (err instanceof RunnerRefusedError) return err.message.replace(/^runner refused: /, '');
  return `the sandbox's runner did not answer (${(err as Error).message})`;
}
