import { Injectable, type OnModuleInit } from '@nestjs/common';
import { SessionKernels, SessionProcesses } from '@switchyard/sandbox';
import { SessionEvents, type SessionEventType } from '../events/session-events';
import { SessionsService } from '../sessions/sessions.service';

/**
 * Kernels and background processes on the session's event stream: `kernel.started`, `kernel.ended` (with why),
 * `process.output` (redacted chunks with their log seq) and `process.exited`. Nothing is published for a session
 * that is ending: its stream is closed, and its processes die with it.
 */
@Injectable()
export class StatefulEvents implements OnModuleInit {
  constructor(
    private readonly kernels: SessionKernels,
    private readonly processes: SessionProcesses,
    private readonly events: SessionEvents,
    private readonly sessions: SessionsService,
  ) {}

  onModuleInit(): void {
    const publish = (sessionId: string, type: SessionEventType, data: Record<string, unknown>): void => {
      if (this.sessions.isLive(sessionId)) this.events.publish(sessionId, type, data);
    };
    this.kernels.listen({
      kernelStarted: (k) =>
        publish(k.sessionId, 'kernel.started', { kernelId: k.id, language: k.language, tier: k.tier }),
      kernelEnded: (k, reason) =>
        publish(k.sessionId, 'kernel.ended', { kernelId: k.id, language: k.language, tier: k.tier, reason }),
    });
    this.processes.listen({
      processOutput: (p, entry) =>
        publish(p.sessionId, 'process.output', {
          processId: p.id,
          ...(p.name !== undefined && { name: p.name }),
          stream: entry.stream,
          seq: entry.seq,
          chunk: entry.text,
        }),
      processExited: (p) =>
        publish(p.sessionId, 'process.exited', {
          processId: p.id,
          ...(p.name !== undefined && { name: p.name }),
          ...(p.exitCode !== undefined && { exitCode: p.exitCode }),
          ...(p.signal !== undefined && { signal: p.signal }),
          ...(p.endReason !== undefined && { reason: p.endReason }),
        }),
    });
  }
}
