import * as fs from 'node:fs';
import * as path from 'node:path';
import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { MAX_SOCKET_PATH_BYTES, pooledCallSocketName, withCallSocket } from '../../../core/call-channel';
import type { DockerClient } from '../docker-client';
import { SandboxInternalError } from '../../../core/sandbox.errors';
import type { CallChannel, TierJob, TierRunResult } from '../../../core/sandbox.types';
import { emptyResult, formatBytes, outOfMemory } from '../../../core/supervision/limit-messages';
import type { RunSupervisor } from '../../../core/supervision/run-supervisor';
import { RunnerLostError } from '../../../core/pooled.errors';
import type { ResolvedPooledOptions } from './pooled.options';
import { EGRESS_TARGET, egressDirOf } from './container-config';
import type { PooledContainer } from './pooled-container';
import { type RunnerExit } from '../../../core/runner/runner-protocol';
import { RunnerRefusedError } from '../../../core/runner/runner.errors';
import { runnerResult } from '../../../core/runner/runner-result';
import { SupervisedRun } from '../../../core/runner/supervised-run';
import type { Lease, SessionLeases } from './session-leases';

/** A run's call channel answering in its container's own directory, until `close`. */
interface OpenCall {
  /** The socket's path inside the container. */
  inside: string;
  /** Stops the channel answering there and removes the socket. Never throws. */
  close(): Promise<void>;
}

/**
 * One run on a leased container, through its runner's protocol (docker/sandbox/runner/runner.py): the runner
 * enforces the timeout and output caps and kills every process the run left; the engine keeps the exact caps and
 * redaction (`RunSupervisor`), the caller's abort, and a hard deadline of timeout + `runnerGraceMs`, past which the
 * container is destroyed. A runner lost during a run takes its container with it. A run with a call channel has its
 * socket in the container's egress directory for exactly as long as the run lasts.
 */
export class RunnerRuns {
  constructor(
    private readonly options: ResolvedPooledOptions,
    private readonly docker: DockerClient,
    private readonly leases: SessionLeases,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** `started`: when the action reached the tier (`clock.monotonic()`), so `durationMs` includes the claim. */
  async run(
    lease: Lease,
    job: TierJob,
    signal: AbortSignal | undefined,
    started: number,
  ): Promise<TierRunResult> {
    const { container } = lease;
    const run = new SupervisedRun(container.connection, job, this.clock, started);
    const { supervisor } = run;
    if (lease.released || signal?.aborted) return { ...emptyResult(supervisor.elapsedMs()), aborted: true };
    if (!container.alive) {
      return this.runnerLost(lease, job, new Error('the runner was already gone'), supervisor);
    }
    await this.leases.ensureWorkspace(lease, job.workspaceDir);
    const call = job.channel && (await this.openCall(container, job.actionId, job.channel));
    // The session's container lives on: from its second run on, its next python run finds an interpreter started (a
    // session that came back once likely comes back again; one that runs once and ends pays no python start for it).
    const standby = lease.runs++ > 0;

    const sent = await run.send(
      {
        env: withCallSocket(job.env, call?.inside),
        workspace: lease.workspace.id,
        graceMs: this.options.runnerGraceMs,
        standby,
        ...(signal && { signal }),
      },
      {
        failed: (err) => {
          if (lease.released || this.leases.closed)
            return Promise.resolve({ ...supervisor.collected(), aborted: true });
          if (err instanceof RunnerRefusedError && err.code === 'workspace') {
            return this.workspaceNotVisible(lease, err);
          }
          return this.runnerLost(lease, job, err as Error, supervisor);
        },
        // However the run ended (exit, timeout, kill, runner lost, hung), its channel ends with it.
        finished: async () => {
          await call?.close();
        },
      },
    );
    if ('result' in sent) return sent.result;
    const outcome = sent.exit;
    if (outcome === 'hung') {
      await this.leases.retireAfterFailure(lease);
      throw new RunnerLostError(
        'RUNNER_UNRESPONSIVE',
        `the runner of the session's container did not finish the run within its timeout + ${this.options.runnerGraceMs} ms; ` +
          `the container was destroyed and the session's next action gets a fresh one (workspace kept, /tmp lost)`,
        { container: container.shortId },
      );
    }
    return this.toResult(outcome, supervisor, job);
  }

  /**
   * Makes the action's call channel answer in the container's egress directory (mounted read-only at EGRESS_TARGET
   * since the container's creation, so nothing about the container changes) under a name of this action's own.
   */
  private async openCall(
    container: PooledContainer,
    actionId: string,
    channel: CallChannel,
  ): Promise<OpenCall> {
    const name = pooledCallSocketName(actionId);
    const socketPath = path.join(egressDirOf(container.mountPoint), name);
    const failed = (why: string, cause?: unknown) =>
      new SandboxInternalError(
        'CALL_SOCKET',
        `could not open the action's call channel in the session's container: ${why}`,
        { retriable: cause !== undefined, cause },
      );
    if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH_BYTES) {
      throw failed(`${socketPath} is too long for a Unix socket; use a shorter pooled.mountRoot`);
    }
    let stop: () => Promise<void>;
    try {
      // Only this tier names sockets `call-*` there: one left behind (a stop that failed to remove it) is stale.
      await fs.promises.rm(socketPath, { force: true });
      stop = await channel.listen(socketPath);
    } catch (err) {
      throw failed((err as Error).message, err);
    }
    return {
      inside: `${EGRESS_TARGET}/${name}`,
      close: async () => {
        await stop().catch((err: Error) =>
          this.logger.warn(
            `call channel of ${actionId} in ${container.shortId}: stop failed: ${err.message}`,
          ),
        );
        await fs.promises.rm(socketPath, { force: true }).catch(() => undefined);
      },
    };
  }

  private toResult(exit: RunnerExit, supervisor: RunSupervisor, job: TierJob): TierRunResult {
    const limits = this.options.limits;
    return runnerResult(exit, supervisor, {
      memory: `the container's ${formatBytes(limits.memoryBytes)} limit`,
      output: job.output,
      fileSizeBytes: limits.fileSizeBytes,
      pids: limits.pids,
    });
  }

  /**
   * The runner died during a run. Out of memory (the kernel chose the runner, or the whole container) is the
   * run's outcome; anything else is an engine fault. Either way the container is destroyed first.
   */
  private async runnerLost(
    lease: Lease,
    job: TierJob,
    err: Error,
    supervisor: RunSupervisor,
  ): Promise<TierRunResult> {
    const { container } = lease;
    const state = await this.docker.inspect(container.id).catch(() => undefined);
    const diagnostics = container.diagnostics();
    await this.leases.retireAfterFailure(lease);
    if (state?.oomKilled) {
      return {
        ...supervisor.collected(),
        signal: 'SIGKILL',
        limit: outOfMemory(
          `the container's ${formatBytes(this.options.limits.memoryBytes)} limit ` +
            `and took the runner down; the session's container was replaced (workspace kept, /tmp lost)`,
        ),
      };
    }
    this.logger.warn(
      `runner of ${container.shortId} (session ${job.sessionId}) lost during ${job.actionId}: ${err.message}` +
        (diagnostics ? `; runner stderr: ${diagnostics.slice(-300)}` : ''),
    );
    throw new RunnerLostError(
      'RUNNER_LOST',
      `the runner in the session's container stopped during the run (${err.message}); the container was destroyed ` +
        `and the session's next action gets a fresh one (workspace kept, /tmp lost)`,
      { container: container.shortId, exitCode: state?.exitCode },
      { cause: err },
    );
  }

  /**
   * The runner refused a run because /workspace is not the session workspace (nothing of the run started): a broken
   * mount propagation leaves it the empty mount point. The container is destroyed; the claim cannot work here.
   */
  private async workspaceNotVisible(lease: Lease, err: RunnerRefusedError): Promise<never> {
    await this.leases.retireAfterFailure(lease);
    throw new SandboxInternalError(
      'WORKSPACE_NOT_VISIBLE',
      `the session workspace did not appear at /workspace in the pooled container (it sees ` +
        `${err.workspace ? `device/inode ${err.workspace.join('/')}` : 'something else'}, expected ` +
        `${lease.workspace.id.join('/')}); is pooled.mountRoot (${this.options.mountRoot}) a shared mount in the ` +
        `Docker daemon's mount namespace?`,
      { retriable: false, cause: err },
    );
  }
}
