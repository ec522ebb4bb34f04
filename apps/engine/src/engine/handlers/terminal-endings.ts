import { Injectable, Logger, type OnModuleInit } from '@nestjs/common';
import { SessionTerminals, type TerminalInfo } from '@switchyard/sandbox';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { TerminalActionRequest } from '../../state/actions/action-request';
import { ExecutionEngine } from '../actions/execution-engine.service';
import { TerminalRequests } from './terminal-requests';

/** Ends that are recorded here: the others are a close asked for (its own action) or the session's or engine's end. */
const REPORTED = new Set<string>(['exited', 'idle', 'sandbox_lost']);

/**
 * Records the end of a terminal that ended by itself (its shell exited, it idled out, its sandbox was lost) as a
 * `terminal` action, op `close`, with the reason: the session's timeline then shows every terminal's end with what
 * went through it, whoever ended it. It takes the one path like any action; should a policy ask for approval of
 * `terminal_close`, this record does not wait for a person (the terminal is gone already): it is cancelled at once.
 */
@Injectable()
export class TerminalEndings implements OnModuleInit {
  private readonly logger = new Logger('Terminal');

  constructor(
    private readonly terminals: SessionTerminals,
    private readonly sessions: SessionsService,
    private readonly engine: ExecutionEngine,
    private readonly requests: TerminalRequests,
  ) {}

  onModuleInit(): void {
    this.terminals.listen({ terminalEnded: (info) => void this.record(info) });
  }

  private async record(info: TerminalInfo): Promise<void> {
    if (info.endReason === undefined || !REPORTED.has(info.endReason)) return;
    const session = this.sessions.find(info.sessionId);
    if (!session || this.engine.isShuttingDown) return;
    const request = this.requests.make<TerminalActionRequest>({
      type: 'terminal',
      op: 'close',
      terminalId: info.id,
      reason: info.endReason as 'exited' | 'idle' | 'sandbox_lost',
    });
    try {
      const submitted = await this.engine.submit(session, request);
      if (submitted.approval) await this.engine.cancel(session, submitted.id);
      await submitted.completion;
    } catch (err) {
      this.logger.warn({
        msg: 'the end of a terminal could not be recorded',
        terminalId: info.id,
        sessionId: info.sessionId,
        err: String(err),
      });
    }
  }
}
