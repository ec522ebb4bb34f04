import { Logger } from '@nestjs/common';
import { type Clock, type DisplayResult, displayResult, type Language } from '@switchyard/common';
import type { CellDone } from '../runner/runner-protocol';
import { RunnerRefusedError } from '../runner/runner.errors';
import { CAP_SLACK_BYTES } from '../runner/supervised-run';
import { SandboxInternalError, SandboxUnavailableError } from '../sandbox.errors';
import { formatBytes, outOfMemory, outputCap } from '../supervision/limit-messages';
import { RunSupervisor } from '../supervision/run-supervisor';
import { adoptedKernel, kernelRecord } from './adopted-records';
import { type Kernel, KERNEL_END_WORDS, KernelRegistry, newKernelId } from './kernel-registry';
import type { KernelReset } from './kernel-ref';
import type { AdoptedBox, StatefulBox, StatefulBoxHost } from './stateful-box.port';
import type {
  CellJob,
  CellRunResult,
  KernelEndReason,
  KernelInfo,
  StatefulListener,
  StatefulTier,
} from './stateful.types';

/** How long a restart waits for the runner to report the old interpreter gone. */
const KERNEL_EXIT_WAIT_MS = 5000;

const delay = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms).unref());

export interface SessionKernelsOptions {
  /** A kernel without cells this long is stopped. */
  idleMs: number;
  /** After an interrupt (timeout, cancel), how long a cell may take to stop before its kernel is killed. */
  interruptGraceMs: number;
  /** Past timeout + grace + this, a runner that has not answered is taken for hung and its box discarded. */
  runnerGraceMs: number;
  /** A cell's rich results inlined at most (per result, per cell); the kernel writes the rest to workspace files. */
  results: { maxBytes: number; cellMaxBytes: number };
}

/**
 * The session kernels of every session: persistent python, node and bash interpreters that keep state between the
 * code actions sent with `state: "session"`. A kernel lives in the session's stateful box in one tier (its
 * bubblewrap sandbox, or its pooled container) under that tier's limits, beside the runner that starts it and runs
 * its cells. A cell never runs in a kernel of a weaker tier than the policy routed it to (see `KernelRegistry.pick`).
 *
 * A cell's timeout interrupts it (state kept); a cell that does not stop within `interruptGraceMs` gets its kernel
 * killed, and the answer says its state is lost. Kernels end on request, after `idleMs`, with their box (session
 * end, a lost runner, shutdown); the next cell then starts a fresh one (`started: true`).
 */
export class SessionKernels {
  private readonly logger = new Logger(SessionKernels.name);
  private readonly registry: KernelRegistry;
  private readonly hosts = new Map<StatefulTier, StatefulBoxHost>();
  private readonly watchedBoxes = new WeakSet<StatefulBox>();
  private readonly listeners: StatefulListener[] = [];
  /** Why a session's kernel of a language last ended unasked (by `sessionId\0language`): told on the next cell. */
  private readonly resets = new Map<string, KernelReset>();
  private closed = false;

  constructor(
    hosts: StatefulBoxHost[],
    private readonly options: SessionKernelsOptions,
    private readonly clock: Clock,
  ) {
    for (const host of hosts) {
      this.hosts.set(host.tier, host);
      host.onAdopted((adopted) => this.adopt(host, adopted));
    }
    this.registry = new KernelRegistry(clock);
  }

  /** Tiers that can hold kernels in this engine. */
  get tiers(): StatefulTier[] {
    return [...this.hosts.keys()];
  }

  listen(listener: StatefulListener): void {
    this.listeners.push(listener);
  }

  list(sessionId: string): KernelInfo[] {
    return this.registry
      .of(sessionId)
      .map((k) => this.registry.info(k))
      .sort((a, b) => a.startedAt.localeCompare(b.startedAt) || a.id.localeCompare(b.id));
  }

  /** Tiers in which the session has a kernel that has not ended. */
  liveTiers(sessionId: string): StatefulTier[] {
    return [...new Set(this.registry.of(sessionId).flatMap((k) => (k.ended ? [] : [k.tier])))];
  }

  get(sessionId: string, kernelId: string): KernelInfo {
    return this.registry.info(this.registry.get(sessionId, kernelId));
  }

  /** Runs one cell in the session's kernel for its language (started when it has none), one at a time per kernel. */
  async runCell(job: CellJob, signal?: AbortSignal): Promise<CellRunResult> {
    if (this.closed) throw new SandboxUnavailableError('the engine is shutting down');
    const host = this.hosts.get(job.tier);
    if (!host) throw new SandboxUnavailableError(`the ${job.tier} tier holds no kernels in this engine`);
    const { kernel: found, skipped } = this.registry.pick(
      job.sessionId,
      job.language,
      job.tier,
      job.tierExplicit,
    );
    const started = found === undefined;
    const kernel = found ?? (await this.start(host, job));
    const note =
      skipped.length > 0 && skipped.every((k) => k !== kernel)
        ? skippedNote(job, kernel, skipped)
        : undefined;
    // A kernel that died or idled out since the last cell: this answer says so (once), as `kernel.reset`.
    const reset = started ? this.takeReset(job.sessionId, job.language) : undefined;
    const turn = kernel.tail.then(() => this.cell(kernel, job, started, signal));
    kernel.tail = turn.catch(() => undefined);
    const result = await turn;
    if (reset) result.kernel = { ...result.kernel, reset };
    return note ? { ...result, note } : result;
  }

  /** Stops the running cell of a kernel (KeyboardInterrupt and the like); its state is kept. */
  async interrupt(sessionId: string, kernelId: string): Promise<{ running: boolean }> {
    const kernel = this.registry.get(sessionId, kernelId);
    if (!kernel.busy) return { running: false };
    const ack = await kernel.box.connection.kernelInterrupt(kernel.id);
    return { running: ack.running };
  }

  /** A fresh interpreter under the same id: the running cell (if any) ends with its state lost. */
  async restart(sessionId: string, kernelId: string): Promise<KernelInfo> {
    const old = this.registry.get(sessionId, kernelId);
    old.restarting = true;
    await this.stopAndWait(old);
    await old.tail; // the cell that was running has answered
    this.forget(old, 'restarted');
    const host = this.hosts.get(old.tier)!;
    const fresh = await this.create(host, old, old.id);
    return this.registry.info(fresh);
  }

  /** Ends a kernel on request; a running cell ends with its state lost. */
  async stop(sessionId: string, kernelId: string): Promise<void> {
    const kernel = this.registry.get(sessionId, kernelId);
    await this.end(kernel, 'stopped');
  }

  /** Every kernel of an ended session; their box goes with the session. Idempotent. */
  async releaseSession(sessionId: string): Promise<void> {
    for (const key of [...this.resets.keys()]) if (key.startsWith(`${sessionId}\0`)) this.resets.delete(key);
    await Promise.allSettled(this.registry.of(sessionId).map((k) => this.end(k, 'session_ended')));
  }

  /** Shutdown: no kernel starts after this; the tiers kill the boxes and everything in them. */
  close(): void {
    this.closed = true;
    for (const kernel of this.registry.all()) this.forget(kernel, 'shutdown');
  }

  private start(host: StatefulBoxHost, job: CellJob): Promise<Kernel> {
    return this.create(host, job, newKernelId());
  }

  private async create(
    host: StatefulBoxHost,
    from: Pick<CellJob, 'sessionId' | 'language' | 'workspaceDir' | 'baseEnv' | 'egress' | 'image'>,
    id: string,
  ): Promise<Kernel> {
    const { sessionId, language, workspaceDir, baseEnv, egress, image } = from;
    const box = await host.box(sessionId, workspaceDir, egress, image);
    this.watch(box);
    const now = this.clock.now().toISOString();
    const record = kernelRecord({
      startedAt: now,
      workspaceDir,
      baseEnv,
      ...(image !== undefined && { image }),
    });
    const pid = await this.launch(box, id, language, baseEnv, record);
    const kernel: Kernel = {
      id,
      sessionId,
      language,
      tier: host.tier,
      box,
      workspaceDir,
      baseEnv,
      ...(egress && { egress }),
      ...(image !== undefined && { image }),
      pid,
      executionCount: 0,
      busy: false,
      startedAt: now,
      lastUsedAt: now,
      tail: Promise.resolve(),
      unpin: box.pin(),
      ended: false,
    };
    this.registry.add(kernel);
    this.armIdle(kernel);
    this.emit('kernelStarted', kernel);
    return kernel;
  }

  private async launch(
    box: StatefulBox,
    id: string,
    language: Language,
    env: Record<string, string>,
    meta: Record<string, unknown>,
  ): Promise<number> {
    const interpreter = box.interpreters[language];
    try {
      const { pid } = await box.connection.kernelStart({
        kernel: id,
        language,
        env,
        workspace: box.workspace,
        meta,
        ...(interpreter !== undefined && { interpreter }),
      });
      return pid;
    } catch (err) {
      throw new SandboxInternalError(
        'KERNEL_START',
        `could not start a ${language} kernel in the session's ${box.tier} sandbox: ${(err as Error).message}`,
        { retriable: !(err instanceof RunnerRefusedError), cause: err },
      );
    }
  }

  private async cell(
    kernel: Kernel,
    job: CellJob,
    started: boolean,
    signal?: AbortSignal,
  ): Promise<CellRunResult> {
    const t0 = this.clock.monotonic();
    const { connection } = kernel.box;
    if (kernel.ended)
      throw new SandboxUnavailableError(`kernel ${kernel.id} ended before the cell could run`);
    kernel.busy = true;
    clearTimeout(kernel.idleTimer);
    const grace = this.options.interruptGraceMs;
    let escalation: NodeJS.Timeout | undefined;
    const supervisor = new RunSupervisor({
      job,
      clock: this.clock,
      startedAt: t0,
      // The engine's own cap (after redaction) or the caller's abort: interrupt, then kill if it will not stop.
      kill: () => {
        void connection.kernelInterrupt(kernel.id).catch(() => undefined);
        escalation = setTimeout(() => void connection.kernelStop(kernel.id).catch(() => undefined), grace);
      },
    });
    const results: DisplayResult[] = [];
    const { done } = connection.cell(
      {
        kernel: kernel.id,
        code: job.code,
        env: job.env,
        timeoutMs: job.timeoutMs,
        graceMs: grace,
        capBytes: job.output.maxBytes + CAP_SLACK_BYTES,
        capLines: job.output.maxLines,
        results: this.options.results,
      },
      (fd, data) => supervisor.push(fd === 2 ? 'stderr' : 'stdout', data),
      (result) => {
        const shown = displayResult(result);
        if (shown) results.push(shown);
      },
    );
    supervisor.watch({ signal });
    let hung: NodeJS.Timeout | undefined;
    const deadline = new Promise<'hung'>((resolve) => {
      hung = setTimeout(() => resolve('hung'), job.timeoutMs + 2 * grace + this.options.runnerGraceMs);
    });
    try {
      const outcome = await Promise.race([done, deadline]);
      if (outcome === 'hung') {
        this.forget(kernel, 'died');
        await this.hosts.get(kernel.tier)?.discard(kernel.box, 'its runner did not finish a cell');
        throw new SandboxInternalError(
          'KERNEL_UNRESPONSIVE',
          `the session's ${kernel.tier} sandbox did not finish the cell within its timeout; the sandbox was ` +
            `replaced and the kernel's state is lost (workspace kept)`,
        );
      }
      return { ...this.toResult(kernel, job, started, outcome, supervisor), results };
    } catch (err) {
      if (err instanceof SandboxInternalError) throw err;
      // The runner went away during the cell: the box is gone and every kernel in it with it.
      this.forget(kernel, 'died');
      // Its memory limit took the whole box (e.g. /tmp filled with files, which are memory the OOM killer cannot
      // free by killing processes): the cell met a limit, like a fresh run meeting it, not an engine fault.
      if (kernel.box.oomKilledSinceLastCheck?.()) return this.lostToMemory(kernel, started, supervisor);
      throw new SandboxInternalError(
        'KERNEL_LOST',
        `the session's ${kernel.tier} sandbox stopped during the cell (${(err as Error).message}); the kernel's ` +
          `state is lost and the next cell starts a fresh one`,
        { retriable: true, cause: err },
      );
    } finally {
      clearTimeout(hung);
      clearTimeout(escalation);
      supervisor.stop();
      kernel.busy = false;
      this.registry.touch(kernel);
      if (!kernel.ended) this.armIdle(kernel);
    }
  }

  private toResult(
    kernel: Kernel,
    job: CellJob,
    started: boolean,
    done: CellDone,
    supervisor: RunSupervisor,
  ): CellRunResult {
    kernel.executionCount = done.count;
    const collected = supervisor.collected();
    // An OOM kill the runner cannot see (no cgroup inside bubblewrap) the host reads from the box's cgroup.
    const oom =
      done.oomKilled ?? (done.stateLost ? kernel.box.oomKilledSinceLastCheck?.() : undefined) ?? false;
    if (done.stateLost) this.forget(kernel, 'died');
    const result: CellRunResult = {
      ...collected,
      timedOut: done.timedOut,
      truncated: {
        stdout: collected.truncated.stdout || done.capped.stdout,
        stderr: collected.truncated.stderr || done.capped.stderr,
      },
      kernel: {
        id: kernel.id,
        language: kernel.language,
        tier: kernel.tier,
        executionCount: done.count,
        started,
      },
      ...(done.exitCode !== null && { exitCode: done.exitCode }),
      ...(kernel.box.containerId !== undefined && { containerId: kernel.box.containerId }),
      ...(done.kernelExit?.signal && { signal: done.kernelExit.signal }),
      ...(done.result !== null && { result: done.result }),
      ...(done.stateLost && { stateLost: true }),
      ...(done.error && { exception: done.error }),
    };
    if (supervisor.reason === 'abort') result.aborted = true;
    else if (done.interrupted && !done.timedOut && done.ended === 'interrupt') result.interrupted = true;
    if (oom) {
      const bytes = this.hosts.get(kernel.tier)!.memoryBytes;
      result.limit = outOfMemory(`the ${formatBytes(bytes)} limit of the session's ${kernel.tier} sandbox`);
    } else if (
      supervisor.reason === 'output' ||
      done.ended === 'output' ||
      done.capped.stdout ||
      done.capped.stderr
    ) {
      result.limit = outputCap(job.output);
    }
    if (done.stateLost && result.exitCode === undefined && done.kernelExit?.exitCode != null) {
      result.exitCode = done.kernelExit.exitCode;
    }
    return result;
  }

  /**
   * A cell whose box the OOM killer ended, runner and all: the kernel's state, and the box's /tmp with it, are gone;
   * the workspace stays, and the next cell starts a fresh kernel in a fresh box.
   */
  private lostToMemory(kernel: Kernel, started: boolean, supervisor: RunSupervisor): CellRunResult {
    const bytes = this.hosts.get(kernel.tier)!.memoryBytes;
    return {
      ...supervisor.collected(),
      timedOut: false,
      kernel: {
        id: kernel.id,
        language: kernel.language,
        tier: kernel.tier,
        executionCount: kernel.executionCount + 1,
        started,
      },
      ...(kernel.box.containerId !== undefined && { containerId: kernel.box.containerId }),
      signal: 'SIGKILL',
      stateLost: true,
      limit: outOfMemory(
        `the ${formatBytes(bytes)} limit of the session's ${kernel.tier} sandbox (files in its /tmp count against ` +
          `it), which ended with its kernels, processes and /tmp (the workspace is kept)`,
      ),
    };
  }

  /**
   * Kills a kernel and waits for the runner's word that it is gone (bounded), so its `kernel_exit` cannot be taken
   * for the death of the fresh kernel a restart starts under the same id.
   */
  private async stopAndWait(kernel: Kernel): Promise<void> {
    const { connection } = kernel.box;
    let unsubscribe = (): void => undefined;
    const exited = new Promise<void>((resolve) => {
      unsubscribe = connection.onEvent((e) => {
        if (e.ev === 'kernel_exit' && e.kernel === kernel.id) resolve();
      });
    });
    try {
      const { found } = await connection.kernelStop(kernel.id);
      if (found) await Promise.race([exited, kernel.box.closed, delay(KERNEL_EXIT_WAIT_MS)]);
    } catch {
      // The box is gone, and the kernel with it.
    } finally {
      unsubscribe();
    }
  }

  /** Ends a kernel: kills it in its box (when the box still answers) and forgets it. */
  private async end(kernel: Kernel, reason: KernelEndReason): Promise<void> {
    if (kernel.ended) return;
    this.forget(kernel, reason);
    await kernel.box.connection.kernelStop(kernel.id).catch(() => undefined);
  }

  private takeReset(sessionId: string, language: Language): KernelReset | undefined {
    const key = `${sessionId}\0${language}`;
    const reset = this.resets.get(key);
    this.resets.delete(key);
    return reset;
  }

  /** Marks a kernel gone (its process is dead or being killed): no cell runs in it after this. */
  private forget(kernel: Kernel, why: KernelEndReason): void {
    if (kernel.ended) return;
    const reason = kernel.restarting ? 'restarted' : why;
    kernel.ended = true;
    const key = `${kernel.sessionId}\0${kernel.language}`;
    if (reason === 'died' || reason === 'idle') {
      this.resets.set(key, { reason, message: KERNEL_END_WORDS[reason], at: this.clock.now().toISOString() });
    } else this.resets.delete(key);
    clearTimeout(kernel.idleTimer);
    kernel.unpin();
    if (this.registry.remove(kernel)) {
      this.logger.debug(
        `kernel ${kernel.id} (${kernel.language}, session ${kernel.sessionId}) ended: ${KERNEL_END_WORDS[reason]}`,
      );
      this.emit('kernelEnded', kernel, reason);
    }
  }

  private armIdle(kernel: Kernel): void {
    clearTimeout(kernel.idleTimer);
    kernel.idleTimer = setTimeout(() => {
      if (!kernel.busy) void this.end(kernel, 'idle');
    }, this.options.idleMs);
    kernel.idleTimer.unref();
  }

  /**
   * Kernels alive in a box the host adopted (their runner outlived the engine that started them): registered again
   * under their ids and execution counts, their state intact; a cell of the session finds them as before.
   */
  private adopt(host: StatefulBoxHost, { box, kernels }: AdoptedBox): void {
    if (this.closed) return;
    this.watch(box);
    for (const found of kernels) {
      const kernel = adoptedKernel(found, box, host.tier, this.clock);
      if (!kernel || this.registry.of(box.sessionId).some((k) => k.id === kernel.id)) continue;
      this.registry.add({ ...kernel, unpin: box.pin() });
      this.armIdle(this.registry.get(box.sessionId, kernel.id));
      this.logger.log(`kernel ${kernel.id} (${kernel.language}, session ${box.sessionId}) adopted`);
    }
  }

  /** Kernels die with their box, and on their own between cells (the runner says so). */
  private watch(box: StatefulBox): void {
    if (this.watchedBoxes.has(box)) return;
    this.watchedBoxes.add(box);
    box.connection.onEvent((event) => {
      if (event.ev !== 'kernel_exit') return;
      const kernel = this.registry.inBox(box).find((k) => k.id === event.kernel);
      // A kernel that exits during a cell is reported by the cell's answer; one being restarted by `restart`.
      if (kernel && !kernel.busy && !kernel.restarting) this.forget(kernel, 'died');
    });
    void box.closed.then(() => {
      for (const kernel of this.registry.inBox(box)) this.forget(kernel, 'died');
    });
  }

  private emit(event: 'kernelStarted', kernel: Kernel): void;
  private emit(event: 'kernelEnded', kernel: Kernel, reason: KernelEndReason): void;
  private emit(event: 'kernelStarted' | 'kernelEnded', kernel: Kernel, reason?: KernelEndReason): void {
    const info = this.registry.info(kernel);
    for (const l of this.listeners) {
      try {
        if (event === 'kernelStarted') l.kernelStarted?.(info);
        else l.kernelEnded?.(info, reason!);
      } catch (err) {
        this.logger.warn(`kernel listener failed: ${(err as Error).message}`);
      }
    }
  }
}

function skippedNote(job: CellJob, kernel: Kernel, skipped: Kernel[]): string {
  const weaker = skipped.map((k) => `${k.id} (${k.tier} tier)`).join(', ');
  return (
    `this cell's risk needs the ${job.tier} tier or stronger, so it ran in the ${kernel.tier} ${kernel.language} ` +
    `kernel ${kernel.id}; the session's ${kernel.language} kernel ${weaker} was not used and keeps its own state`
  );
}
