import { Inject, Injectable, Logger, OnModuleDestroy, OnModuleInit } from '@nestjs/common';
import { CLOCK, type Clock, NotFoundError, SwitchyardError } from '@switchyard/common';
import { type KernelInfo, SessionKernels } from '@switchyard/sandbox';
import { randomUUID } from 'node:crypto';
import { ExecutionEngine } from '../../engine/actions/execution-engine.service';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { Session } from '../../state/sessions/session.model';
import { JupyterKernel } from './jupyter-kernel';
import { type KernelspecName, LANGUAGE_OF } from './jupyter-kernelspecs';

/** Jupyter kernels one session may hold at once (handles: they share the session's kernel of their language). */
export const MAX_JUPYTER_KERNELS = 64;

/** WebSocket close code of a kernel that went away (deleted, its session ended): "going away". */
export const CLOSE_GOING_AWAY = 1001;

export class JupyterKernelLimitError extends SwitchyardError {
  readonly code = 'JUPYTER_KERNEL_LIMIT';
  readonly kind = 'conflict' as const;
}

/** A kernel as Jupyter's REST API answers it (`GET /api/kernels/{id}`). */
export interface JupyterKernelModel {
  id: string;
  name: KernelspecName;
  last_activity: string;
  execution_state: 'idle' | 'busy';
  connections: number;
}

/**
 * The Jupyter kernels of every session, by session and id, and what REST does to them: start (a new handle),
 * interrupt, restart and delete, each acting on the session kernel of the handle's language. They end with their
 * session and at shutdown (their connections closed).
 */
@Injectable()
export class JupyterKernels implements OnModuleInit, OnModuleDestroy {
  private readonly logger = new Logger('Jupyter');
  private readonly bySession = new Map<string, Map<string, JupyterKernel>>();

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly sessions: SessionsService,
    private readonly sessionKernels: SessionKernels,
    private readonly engine: ExecutionEngine,
  ) {}

  onModuleInit(): void {
    this.sessions.onSessionEnd((sessionId) => {
      for (const kernel of this.list(sessionId)) kernel.end(CLOSE_GOING_AWAY, 'the session ended');
      this.bySession.delete(sessionId);
      return Promise.resolve();
    });
  }

  onModuleDestroy(): void {
    for (const kernels of this.bySession.values()) {
      for (const kernel of kernels.values()) kernel.end(CLOSE_GOING_AWAY, 'the engine is shutting down');
    }
    this.bySession.clear();
  }

  /** A new Jupyter kernel of the session (409 past MAX_JUPYTER_KERNELS). Its session kernel starts with its first cell. */
  start(session: Session, name: KernelspecName, cellTimeoutMs?: number): JupyterKernel {
    let kernels = this.bySession.get(session.id);
    if (!kernels) this.bySession.set(session.id, (kernels = new Map<string, JupyterKernel>()));
    if (kernels.size >= MAX_JUPYTER_KERNELS) {
      throw new JupyterKernelLimitError(
        `session ${session.id} already has ${MAX_JUPYTER_KERNELS} Jupyter kernels: delete one ` +
          '(DELETE …/jupyter/api/kernels/{id}) before starting another',
        { limit: MAX_JUPYTER_KERNELS },
      );
    }
    const kernel = new JupyterKernel(
      randomUUID(),
      name,
      LANGUAGE_OF[name],
      session.id,
      session.tenant,
      () => this.clock.now(),
      cellTimeoutMs,
    );
    kernels.set(kernel.id, kernel);
    this.logger.debug({ msg: 'jupyter kernel started', sessionId: session.id, kernelId: kernel.id, name });
    return kernel;
  }

  /** The session's Jupyter kernels, oldest first. */
  list(sessionId: string): JupyterKernel[] {
    return [...(this.bySession.get(sessionId)?.values() ?? [])];
  }

  /** The session's Jupyter kernel, or undefined. */
  find(sessionId: string, kernelId: string): JupyterKernel | undefined {
    return this.bySession.get(sessionId)?.get(kernelId);
  }

  /** The session's Jupyter kernel, or a 404 naming it. */
  get(sessionId: string, kernelId: string): JupyterKernel {
    const kernel = this.find(sessionId, kernelId);
    if (!kernel) {
      throw new NotFoundError(`Jupyter kernel ${kernelId} not found in session ${sessionId}`, { kernelId });
    }
    return kernel;
  }

  /** Busy while a request of its own is handled, or while its session kernel runs a cell (from anywhere). */
  model(kernel: JupyterKernel): JupyterKernelModel {
    const busy = kernel.busy || this.sessionKernelsOf(kernel).some((k) => k.busy);
    return {
      id: kernel.id,
      name: kernel.name,
      last_activity: kernel.lastActivityAt,
      execution_state: busy ? 'busy' : 'idle',
      connections: kernel.connections,
    };
  }

  /** The session's live kernels of the Jupyter kernel's language. */
  sessionKernelsOf(kernel: JupyterKernel): KernelInfo[] {
    return this.sessionKernels.list(kernel.sessionId).filter((k) => k.language === kernel.language);
  }

  /**
   * Stops the running cell, its session kernel keeping its state (KeyboardInterrupt in python). A cell that has not
   * reached the kernel yet (queued, awaiting approval) is cancelled instead.
   */
  async interrupt(session: Session, kernel: JupyterKernel): Promise<void> {
    let interrupted = false;
    for (const k of this.sessionKernelsOf(kernel).filter((s) => s.busy)) {
      const { running } = await this.sessionKernels
        .interrupt(session.id, k.id)
        .catch(() => ({ running: false }));
      interrupted ||= running;
    }
    const pending = kernel.currentActionId;
    if (!interrupted && pending !== undefined)
      await this.engine.cancel(session, pending).catch(() => undefined);
  }

  /** A fresh interpreter under each session kernel of the language: state cleared; a running cell ends. */
  async restart(kernel: JupyterKernel): Promise<void> {
    for (const k of this.sessionKernelsOf(kernel)) {
      // One that ended meanwhile needs no restart: the next cell starts a fresh one anyway.
      await this.sessionKernels.restart(kernel.sessionId, k.id).catch(ignoreEnded);
    }
  }

  /** Ends the session kernels of the language (the next cell starts a fresh one); the Jupyter kernel stays. */
  async stopSessionKernels(kernel: JupyterKernel): Promise<void> {
    for (const k of this.sessionKernelsOf(kernel)) {
      await this.sessionKernels.stop(kernel.sessionId, k.id).catch(ignoreEnded);
    }
  }

  /** Deletes the Jupyter kernel: its session kernel stops, its waiting cell is cancelled, its connections close. */
  async remove(session: Session, kernel: JupyterKernel): Promise<void> {
    this.bySession.get(session.id)?.delete(kernel.id);
    kernel.end(CLOSE_GOING_AWAY, 'the kernel was deleted');
    const pending = kernel.currentActionId;
    if (pending !== undefined) await this.engine.cancel(session, pending).catch(() => undefined);
    await this.stopSessionKernels(kernel);
    this.logger.debug({ msg: 'jupyter kernel deleted', sessionId: session.id, kernelId: kernel.id });
  }
}

function ignoreEnded(err: unknown): void {
  if (!(err instanceof NotFoundError)) throw err;
}
