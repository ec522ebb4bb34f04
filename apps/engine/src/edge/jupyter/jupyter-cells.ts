import { Injectable } from '@nestjs/common';
import { type ActionResult, InvalidInputError, SwitchyardError } from '@switchyard/common';
import { parseActionRequest } from '../../engine/actions/dto/action-body';
import { ExecutionEngine, type SubmittedAction } from '../../engine/actions/execution-engine.service';
import { SessionEvents } from '../../session/events/session-events';
import type { Session } from '../../state/sessions/session.model';
import {
  type CellError,
  cellError,
  displayMessages,
  executionCountOf,
  refusedError,
} from './jupyter-cell-outputs';
import type { JupyterKernel } from './jupyter-kernel';
import { JupyterKernels } from './jupyter-kernels';
import type { JupyterRequest } from './jupyter-messages';
import { type Publish, StreamRelay } from './jupyter-stream-relay';

/** An `execute_reply`'s content and metadata. */
export interface ExecuteReply {
  content: Record<string, unknown>;
  metadata: Record<string, unknown>;
  /** The cell did not succeed: later execute requests waiting with `stop_on_error` are aborted. */
  failed: boolean;
}

/** A Jupyter message id that may stand as the action's request id (as a sane `X-Request-Id` does). */
const REQUEST_ID = /^[\w.:-]{1,128}$/;

/**
 * Runs an `execute_request` as a Switchyard code action: the body a REST client would send for it (`{"type":
 * "code", "language", "state": "session", "code"}`), parsed and submitted through the same `ExecutionEngine.submit`
 * (validation, risk routing, policy, approvals, hooks, limits, SSE, graph record). While it runs, its output is
 * published as `stream` messages (the session's live `action.output` events); then what it displayed, then its
 * error; the reply carries the session kernel's execution count.
 */
@Injectable()
export class JupyterCells {
  constructor(
    private readonly engine: ExecutionEngine,
    private readonly events: SessionEvents,
    private readonly kernels: JupyterKernels,
  ) {}

  async execute(
    session: Session,
    kernel: JupyterKernel,
    request: JupyterRequest,
    publish: Publish,
  ): Promise<ExecuteReply> {
    const { code, silent } = request.content;
    if (typeof code !== 'string') {
      const invalid = new InvalidInputError('content.code', 'content.code must be a string');
      return this.failed(kernel, refusedError(invalid), publish);
    }
    // An empty cell runs nothing, as in Jupyter: no action, the count unchanged.
    if (code.trim() === '') return this.succeeded(kernel.executionCount, {});
    if (silent !== true) {
      const next = Math.max(0, ...this.kernels.sessionKernelsOf(kernel).map((k) => k.executionCount)) + 1;
      publish('execute_input', { code, execution_count: next });
    }
    const relay = new StreamRelay(this.events, session.id, publish, kernel.language === 'python');
    let submitted: SubmittedAction;
    try {
      const action = parseActionRequest({
        type: 'code',
        language: kernel.language,
        state: 'session',
        code,
        ...(kernel.cellTimeoutMs !== undefined && { timeoutMs: kernel.cellTimeoutMs }),
      });
      submitted = await this.engine.submit(
        session,
        action,
        REQUEST_ID.test(request.msgId) ? { requestId: request.msgId } : {},
      );
    } catch (err) {
      relay.stop();
      if (err instanceof SwitchyardError) return this.failed(kernel, refusedError(err), publish);
      throw err;
    }
    kernel.currentActionId = submitted.id;
    relay.follow(submitted.id);
    try {
      const { result, inputRefusal } = await submitted.completion;
      return this.answer(kernel, result, silent === true, relay, publish, inputRefusal);
    } finally {
      relay.stop();
      if (kernel.currentActionId === submitted.id) kernel.currentActionId = undefined;
    }
  }

  private answer(
    kernel: JupyterKernel,
    result: ActionResult,
    silent: boolean,
    relay: StreamRelay,
    publish: Publish,
    refusal: SwitchyardError | undefined,
  ): ExecuteReply {
    const error = cellError(result, kernel.language, refusal);
    // Output no live event carried (the run streamed none: it never ran) comes from the answer.
    const streamed = relay.streamed;
    relay.end(error?.traceback[0]?.startsWith('Traceback (most recent call last):') === true);
    if (!streamed) {
      if (result.stdout) publish('stream', { name: 'stdout', text: result.stdout });
      if (result.stderr) publish('stream', { name: 'stderr', text: result.stderr });
    }
    const count = executionCountOf(result) ?? kernel.executionCount;
    kernel.executionCount = count;
    for (const m of displayMessages(result, count)) {
      // A silent request publishes no execute_result, as Jupyter's displayhook does not; displays still go out.
      if (!(silent && m.msgType === 'execute_result')) publish(m.msgType, m.content);
    }
    const metadata = { switchyard: { actionId: result.id, status: result.status, tier: result.tier } };
    if (!error) return this.succeeded(count, metadata);
    publish('error', { ...error });
    return { content: { status: 'error', execution_count: count, ...error }, metadata, failed: true };
  }

  private succeeded(count: number, metadata: Record<string, unknown>): ExecuteReply {
    return {
      content: { status: 'ok', execution_count: count, user_expressions: {}, payload: [] },
      metadata,
      failed: false,
    };
  }

  private failed(kernel: JupyterKernel, error: CellError, publish: Publish): ExecuteReply {
    publish('error', { ...error });
    return {
      content: { status: 'error', execution_count: kernel.executionCount, ...error },
      metadata: {},
      failed: true,
    };
  }
}
