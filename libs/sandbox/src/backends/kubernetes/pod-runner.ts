import type { Clock } from '@switchyard/common';
import { RunnerConnection, type RunnerConnectionOptions } from '../../core/runner/runner-connection';
import { type RunnerHello, type RunnerPong, type RunnerResynced } from '../../core/runner/runner-protocol';
import { RunnerProtocolError } from '../../core/runner/runner.errors';
import type { KubeClient } from './kube-client';
import type { ContainerStatusInfo, PodInfo } from './kube-types';
import { KubeApiError } from './kubernetes.errors';
import { RUNNER_CONTAINER } from './kubernetes.constants';

const STDERR_TAIL_BYTES = 2048;
/** What the engine sends after attaching: it wakes a runner waiting in the entry point, a live runner skips it. */
const WAKE = '\n';

/** A pod's runner as the engine holds it: the attach connection and what the runner said about itself. */
export class PodRunner {
  /**
   * The runner reported an out-of-memory kill (a run, a kernel) in this container instance. containerd then records
   * the instance's end as `OOMKilled` whatever ends it later, so that reason no longer tells how the runner died.
   */
  oomSeen = false;

  constructor(
    readonly podName: string,
    readonly connection: RunnerConnection,
    /** The runner's greeting: from this attach when it woke the runner (`fresh`), else from an earlier one. */
    readonly hello: RunnerHello | undefined,
    /** This attach woke the runner: it is a new process with no kernels or processes. */
    readonly fresh: boolean,
    /** `/workspace`'s device and inode inside the pod, as the runner's ping reported them (decimal). */
    readonly workspace: [dev: string, ino: string],
    /** The container instance attached to (`containerd://…`), when known. */
    readonly containerId: string | undefined,
    private readonly stderrTail: () => string,
  ) {}

  get alive(): boolean {
    return !this.connection.isClosed;
  }

  /** The runner's last diagnostics (its stderr), for error messages. */
  diagnostics(): string {
    return this.stderrTail().trim();
  }

  close(): void {
    this.connection.close();
  }
}

export interface AttachOptions {
  /** How long the runner may take to greet (a woken one) and answer the first ping. */
  startTimeoutMs: number;
  /** The container instance being attached to, if the caller read it. */
  containerId?: string;
}

export function runnerStatus(pod: PodInfo | undefined): ContainerStatusInfo | undefined {
  return pod?.containers.find((c) => c.name === RUNNER_CONTAINER);
}

/** The runner container's attach as a `RunnerConnection`, with the tail of its stderr (`STDERR_TAIL_BYTES`). */
async function attachStreams(client: KubeClient, podName: string, options?: RunnerConnectionOptions) {
  const streams = await client.attach(podName, RUNNER_CONTAINER);
  let stderr = '';
  streams.stderr.on('data', (chunk: Buffer) => {
    stderr = (stderr + chunk.toString('utf8')).slice(-STDERR_TAIL_BYTES);
  });
  streams.stdout.on('error', () => undefined);
  streams.stderr.on('error', () => undefined);
  const connection = new RunnerConnection(
    { stdin: streams.stdin, stdout: streams.stdout, closed: streams.closed, close: () => streams.close() },
    options,
  );
  return { streams, connection, stderr: () => stderr };
}

/**
 * Attaches to a pod's runner, wakes it if it waits in the entry point, and pings it. Sending the wake byte and a ping
 * at once tells both cases apart without a round trip of its own: a woken runner greets before it reads the ping,
 * one already running just answers the ping. Rejects (after closing the attach) when the attach fails, the runner
 * does not answer within `startTimeoutMs`, or its ping fails.
 */
export async function attachRunner(
  client: KubeClient,
  podName: string,
  options: AttachOptions,
  clock: Clock,
): Promise<PodRunner> {
  const { streams, connection, stderr: tail } = await attachStreams(client, podName);
  const runner: { current?: PodRunner; oomSeen: boolean } = { oomSeen: false };
  connection.onEvent((event) => {
    if (event.ev === 'kernel_exit' && event.oomKilled) {
      runner.oomSeen = true;
      if (runner.current) runner.current.oomSeen = true;
    }
  });
  let hello: RunnerHello | undefined;
  void connection.hello.then((h) => (hello = h)).catch(() => undefined);
  const started = clock.monotonic();
  try {
    streams.stdin.write(WAKE);
    const pong: RunnerPong = await connection.ping(options.startTimeoutMs);
    if (!pong.workspace) throw new RunnerProtocolError('the runner did not report /workspace');
    // A woken runner's greeting came before its pong, on the same stream: it has been seen by now.
    const fresh = hello !== undefined;
    runner.current = new PodRunner(
      podName,
      connection,
      hello,
      fresh,
      [String(pong.workspace[0]), String(pong.workspace[1])],
      options.containerId,
      tail,
    );
    runner.current.oomSeen = runner.oomSeen;
    return runner.current;
  } catch (err) {
    connection.close();
    const detail = tail().trim() ? ` (runner stderr: ${tail().trim().slice(-300)})` : '';
    const waited = Math.round(clock.monotonic() - started);
    throw new KubeApiError(
      'KUBE_STREAM',
      `the runner of pod ${podName} did not answer (${waited} ms): ${(err as Error).message}${detail}`,
      {
        retriable: true,
        cause: err,
      },
    );
  }
}

/** A live runner taken over from an engine that went away, and what lives in it. */
export interface ReattachedRunner {
  runner: PodRunner;
  state: RunnerResynced;
}

/**
 * Attaches to the runner of a pod another engine held (it died) without restarting it: the connection discards what
 * the runner sends until it answers a `resync` with a fresh nonce, and numbers its requests far above the old
 * engine's (see `RunnerConnection.resync`), so nothing of the old stream is taken for an answer. The runner ends the
 * old connection's run, cells, terminals and tunnels before it answers with its live kernels and processes. A runner
 * that waits in the entry point (the kubelet restarted it meanwhile) is woken by the newline and answers with none.
 * Rejects (after closing the attach) when the attach fails, the runner does not answer within `startTimeoutMs`, or
 * it reports no /workspace.
 */
export async function reattachRunner(
  client: KubeClient,
  podName: string,
  options: AttachOptions,
  clock: Clock,
): Promise<ReattachedRunner> {
  const { connection, stderr: tail } = await attachStreams(client, podName, { resync: true });
  const holder: { current?: PodRunner } = {};
  connection.onEvent((event) => {
    if (event.ev === 'kernel_exit' && event.oomKilled && holder.current) holder.current.oomSeen = true;
  });
  const started = clock.monotonic();
  try {
    const state = await connection.resync(options.startTimeoutMs);
    if (!state.workspace)
      throw new RunnerProtocolError(`the runner did not report /workspace (${state.error ?? '?'})`);
    holder.current = new PodRunner(
      podName,
      connection,
      undefined,
      false,
      [String(state.workspace[0]), String(state.workspace[1])],
      options.containerId,
      tail,
    );
    return { runner: holder.current, state };
  } catch (err) {
    connection.close();
    const detail = tail().trim() ? ` (runner stderr: ${tail().trim().slice(-300)})` : '';
    const waited = Math.round(clock.monotonic() - started);
    throw new KubeApiError(
      'KUBE_STREAM',
      `the runner of pod ${podName} did not resync (${waited} ms): ${(err as Error).message}${detail}`,
      { retriable: true, cause: err },
    );
  }
}
