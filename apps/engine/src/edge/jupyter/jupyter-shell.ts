import { Inject, Injectable, Logger } from '@nestjs/common';
import { CLOCK, type Clock } from '@switchyard/common';
import type { Session } from '../../state/sessions/session.model';
import { JupyterCells } from './jupyter-cells';
import type { Publish } from './jupyter-stream-relay';
import { codePointLength, complete, isComplete } from './jupyter-completion';
import { type JupyterKernel, type JupyterPeer, MAX_QUEUED_REQUESTS } from './jupyter-kernel';
import { JupyterKernels } from './jupyter-kernels';
import { LANGUAGE_INFO } from './jupyter-kernelspecs';
import {
  type Channel,
  jupyterMessage,
  type JupyterRequest,
  PROTOCOL_VERSION,
  replyType,
} from './jupyter-messages';

/** A reply's content and metadata. */
interface Reply {
  content: Record<string, unknown>;
  metadata?: Record<string, unknown>;
}

const invalid = (evalue: string): Reply => ({
  content: { status: 'error', ename: 'SwitchyardInvalidInput', evalue, traceback: [] },
});

/**
 * What a Jupyter kernel does with the requests its clients send: shell requests one at a time in arrival order,
 * control requests (interrupt, shutdown) at once, each between an IOPub `busy` and `idle` naming it. Cells go to
 * `JupyterCells`; the rest is answered here without running anything (kernel info, completion, `is_complete`, comm
 * and history queries, which have nothing to list).
 */
@Injectable()
export class JupyterShell {
  private readonly logger = new Logger('Jupyter');

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly cells: JupyterCells,
    private readonly kernels: JupyterKernels,
  ) {}

  receive(session: Session, kernel: JupyterKernel, peer: JupyterPeer, request: JupyterRequest): void {
    if (request.channel === 'control') {
      void this.handle(session, kernel, peer, request);
      return;
    }
    // Input replies (the kernels read no stdin), and IOPub or heartbeat frames from a client, ask for nothing.
    if (request.channel !== 'shell') return;
    const queued = kernel.enqueue((seq) => this.handle(session, kernel, peer, request, seq));
    if (queued) return;
    const evalue = `${MAX_QUEUED_REQUESTS} requests already wait for this kernel; send more once they are answered`;
    this.reply(kernel, peer, request, {
      content: { status: 'error', ename: 'SwitchyardQueueFull', evalue, traceback: [] },
    });
  }

  private async handle(
    session: Session,
    kernel: JupyterKernel,
    peer: JupyterPeer,
    request: JupyterRequest,
    seq?: number,
  ): Promise<void> {
    if (kernel.ended) return;
    const done = kernel.begin();
    const publish: Publish = (msgType, content) =>
      kernel.publish(this.message('iopub', msgType, content, request, kernel));
    publish('status', { execution_state: 'busy' });
    try {
      const reply = await this.answer(session, kernel, request, publish, seq);
      if (reply) this.reply(kernel, peer, request, reply);
    } catch (err) {
      this.logger.error({
        msg: 'a Jupyter request failed inside the engine',
        msgType: request.msgType,
        err: err instanceof Error ? err.message : String(err),
      });
      const evalue = 'internal error while handling the request (the engine logged it)';
      this.reply(kernel, peer, request, {
        content: { status: 'error', ename: 'SwitchyardError', evalue, traceback: [] },
      });
    } finally {
      done();
      publish('status', { execution_state: 'idle' });
    }
  }

  private async answer(
    session: Session,
    kernel: JupyterKernel,
    request: JupyterRequest,
    publish: Publish,
    seq: number | undefined,
  ): Promise<Reply | undefined> {
    const { content } = request;
    switch (request.msgType) {
      case 'kernel_info_request':
        return { content: this.kernelInfo(kernel) };
      case 'execute_request': {
        const stopOnError = content.stop_on_error !== false;
        if (seq !== undefined && kernel.aborted(seq) && stopOnError) {
          return { content: { status: 'aborted', execution_count: kernel.executionCount } };
        }
        const reply = await this.cells.execute(session, kernel, request, publish);
        if (reply.failed && stopOnError) kernel.abortWaiting();
        return reply;
      }
      case 'complete_request': {
        const { code } = content;
        if (typeof code !== 'string') return invalid('content.code must be a string');
        const cursor = content.cursor_pos ?? codePointLength(code);
        if (!Number.isSafeInteger(cursor) || (cursor as number) < 0) {
          return invalid('content.cursor_pos must be a non-negative integer');
        }
        return {
          content: { status: 'ok', ...complete(kernel.language, code, cursor as number), metadata: {} },
        };
      }
      case 'inspect_request':
        return { content: { status: 'ok', found: false, data: {}, metadata: {} } };
      case 'is_complete_request':
        if (typeof content.code !== 'string') return invalid('content.code must be a string');
        return { content: { ...isComplete(kernel.language, content.code) } };
      case 'comm_info_request':
        return { content: { status: 'ok', comms: {} } };
      case 'history_request':
        return { content: { status: 'ok', history: [] } };
      case 'interrupt_request':
        await this.kernels.interrupt(session, kernel);
        return { content: { status: 'ok' } };
      case 'shutdown_request': {
        const restart = content.restart === true;
        await (restart ? this.kernels.restart(kernel) : this.kernels.stopSessionKernels(kernel));
        // Jupyter kernels announce it on IOPub too, where clients watching the kernel see it.
        publish('shutdown_reply', { status: 'ok', restart });
        return { content: { status: 'ok', restart } };
      }
      default:
        // As a Jupyter kernel does: a request it does not know gets no reply.
        return undefined;
    }
  }

  private kernelInfo(kernel: JupyterKernel): Record<string, unknown> {
    return {
      status: 'ok',
      protocol_version: PROTOCOL_VERSION,
      implementation: 'switchyard',
      implementation_version: '1',
      language_info: LANGUAGE_INFO[kernel.language],
      banner:
        `Switchyard session kernel (${kernel.language}): each cell is a code action of the session, ` +
        'risk-routed, policy-checked and recorded',
      help_links: [],
      debugger: false,
    };
  }

  private reply(kernel: JupyterKernel, peer: JupyterPeer, request: JupyterRequest, reply: Reply): void {
    const message = this.message(request.channel, replyType(request.msgType), reply.content, request, kernel);
    if (reply.metadata) message.metadata = reply.metadata;
    peer.send(message);
  }

  private message(
    channel: Channel,
    msgType: string,
    content: Record<string, unknown>,
    request: JupyterRequest,
    kernel: JupyterKernel,
  ) {
    return jupyterMessage(channel, msgType, content, request, kernel.session, this.clock.now());
  }
}
