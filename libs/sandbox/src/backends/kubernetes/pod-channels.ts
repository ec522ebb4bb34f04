import * as net from 'node:net';
import * as path from 'node:path';
import type { Logger } from '@nestjs/common';
import { CALL_SOCKET_NAME } from '../../core/call-channel';
import type { RunnerConnection } from '../../core/runner/runner-connection';
import type { BackChannelTarget } from '../../core/runner/runner-protocol';
import type { RunnerTunnel } from '../../core/runner/runner-tunnel';
import { SandboxInternalError } from '../../core/sandbox.errors';
import type { CallChannel, SessionEgressAccess } from '../../core/sandbox.types';

/** The proxy's socket in `SessionEgressAccess.socketDir`. */
export const EGRESS_PROXY_SOCKET = 'proxy.sock';

/** A run's call channel inside the pod, until `close`. */
export interface PodCall {
  /** `CALL_SOCKET_ENV` for the run: the runner's abstract socket (`@switchyard-call-…`). */
  inside: string;
  /** The socket in the pod goes and the run's tunnels are cut. Never throws. */
  close(): Promise<void>;
}

/** What one runner's back channels lead to: decided here, from what the engine gave the runner's jobs. */
interface Targets {
  /** The session's proxy socket on this host, from when the runner is asked for its egress channel. */
  egress?: string;
  /** The runner's answer to that (once per runner; again after a failure). */
  egressOpened?: Promise<unknown>;
  /** Runs under way with a call channel: their call socket on this host, and their tunnels. */
  calls: Map<string, { hostSocket: string; tunnels: Set<RunnerTunnel> }>;
}

/**
 * A pod's egress and call channels, carried over its runner's attach stream (protocol 6's back channels): the pod
 * has no network and shares no directory with the engine, so the runner listens on abstract Unix sockets in the pod
 * (`channelOpen`) and opens a tunnel for each connection there (`tunnel_in`, tagged `egress` or `call` of run X).
 * This side connects the tunnel to the session's egress proxy socket, or to the call socket of that run while it is
 * under way, both on this host, from what the engine itself gave that runner; anything else is closed. The pod keeps
 * the deny-all NetworkPolicy and no route anywhere.
 */
export class PodChannels {
  private readonly byRunner = new WeakMap<RunnerConnection, Targets>();

  constructor(private readonly logger: Pick<Logger, 'warn'>) {}

  /**
   * The session's egress in this runner's pod: 127.0.0.1:3128 there reaches `egress`'s proxy. Once per runner
   * instance (a restarted runner is a new connection and gets it again at its next job).
   */
  async ensureEgress(connection: RunnerConnection, egress: SessionEgressAccess): Promise<void> {
    const targets = this.targetsOf(connection);
    // The target first: the runner checks that a new forwarder listens by connecting to it, before it answers. A
    // session's egress does not change; should it, the runner's one channel leads to the new proxy from now on.
    targets.egress = path.join(egress.socketDir, EGRESS_PROXY_SOCKET);
    const opened = (targets.egressOpened ??= connection.channelOpen('egress'));
    try {
      await opened;
    } catch (err) {
      if (targets.egressOpened === opened) {
        targets.egressOpened = undefined;
        targets.egress = undefined;
      }
      throw new SandboxInternalError(
        'EGRESS_SOCKET',
        `could not give the session's pod its egress: ${(err as Error).message}`,
        { retriable: true, cause: err },
      );
    }
  }

  /** Run `actionId`'s call channel in the pod, until `close` (which the run's end must call, however it ended). */
  async openCall(connection: RunnerConnection, actionId: string, channel: CallChannel): Promise<PodCall> {
    const targets = this.targetsOf(connection);
    const entry = {
      hostSocket: path.join(channel.socketDir, CALL_SOCKET_NAME),
      tunnels: new Set<RunnerTunnel>(),
    };
    // Registered first: the code may connect as soon as the runner listens.
    targets.calls.set(actionId, entry);
    let inside: string;
    try {
      inside = await connection.channelOpen('call', actionId);
    } catch (err) {
      targets.calls.delete(actionId);
      throw new SandboxInternalError(
        'CALL_SOCKET',
        `could not open the action's call channel in the session's pod: ${(err as Error).message}`,
        { retriable: true, cause: err },
      );
    }
    return {
      inside,
      close: async () => {
        targets.calls.delete(actionId);
        for (const tunnel of entry.tunnels) tunnel.destroy();
        if (!connection.isClosed) await connection.channelClose(actionId).catch(() => undefined);
      },
    };
  }

  private targetsOf(connection: RunnerConnection): Targets {
    let targets = this.byRunner.get(connection);
    if (!targets) {
      const created: Targets = { calls: new Map() };
      this.byRunner.set(connection, (targets = created));
      connection.onIncomingTunnel((tunnel, target) => this.accept(created, tunnel, target));
    }
    return targets;
  }

  /** Connects a tunnel the runner opened to what its target means for that runner now, or closes it. */
  private accept(targets: Targets, tunnel: RunnerTunnel, { target, run }: BackChannelTarget): void {
    const call = target === 'call' && run !== null ? targets.calls.get(run) : undefined;
    const hostSocket = target === 'egress' ? targets.egress : call?.hostSocket;
    if (hostSocket === undefined) {
      this.logger.warn(
        `refused a ${target} channel connection${run !== null ? ` for run ${run}` : ''} from a pod: ` +
          (target === 'egress' ? 'its session has no egress here' : 'that run has no call channel under way'),
      );
      tunnel.destroy();
      return;
    }
    call?.tunnels.add(tunnel);
    const socket = net.connect({ path: hostSocket, allowHalfOpen: true });
    const cut = () => {
      socket.destroy();
      tunnel.destroy();
    };
    socket.once('error', cut);
    tunnel.once('error', cut);
    tunnel.once('close', () => call?.tunnels.delete(tunnel));
    // Bytes flow only once connected (the tunnel holds the code's first bytes meanwhile, within the runner's window);
    // each side's end is passed on as a half-close, and both sides' flow control holds (pipe's backpressure).
    socket.once('connect', () => {
      tunnel.pipe(socket);
      socket.pipe(tunnel);
    });
  }
}
