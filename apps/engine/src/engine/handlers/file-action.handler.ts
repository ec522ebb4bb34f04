import { Injectable } from '@nestjs/common';
import { type ActionError, InvalidInputError, NO_RISK } from '@switchyard/common';
import { FileOpError, resolveInside } from '@switchyard/workspace';
import { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
  refusedWhileRunning,
} from '../actions/action-handler.port';
import {
  FILE_TRANSFER_OPS,
  type FileActionRequest,
  type FileTransferRequest,
} from '../../state/actions/action-request';
import { FileTransferChannel } from './file-transfer-channel';
import { runTransfer } from './file-transfer.run';

const isTransfer = (request: FileActionRequest): request is FileTransferRequest =>
  FILE_TRANSFER_OPS.has(request.op);

/** File operations on the session's workspace, path-guarded: by the engine itself, or in the session's pod. */
@Injectable()
export class FileActionHandler extends ActionHandler<FileActionRequest> {
  readonly type = 'file' as const;

  constructor(
    private readonly workspaces: SessionWorkspaces,
    private readonly transfers: FileTransferChannel,
  ) {
    super();
  }

  prepare(request: FileActionRequest, ctx: ActionContext): PreparedAction {
    if (isTransfer(request)) return this.prepareTransfer(request, ctx);
    const { type: _type, ...op } = request;
    // Lexical checks first, so traversal attempts are refused before anything is recorded.
    const optionalPath = op.op === 'list' || op.op === 'find' || op.op === 'grep';
    if (op.path !== undefined) resolveInside(ctx.workspaceDir, op.path, 'path', { allowEmpty: optionalPath });
    if (op.op === 'move') resolveInside(ctx.workspaceDir, op.to, 'to');
    return {
      tier: 'engine',
      risk: NO_RISK,
      run: async (): Promise<Outcome> => {
        const base = { tier: 'engine' as const, risk: NO_RISK };
        try {
          const { output, touched } = await this.workspaces.fileOp(ctx.session.id, op);
          return { ...base, status: 'succeeded', output, files: touched };
        } catch (err) {
          if (err instanceof FileOpError) {
            const error: ActionError = { class: err.errorClass, code: err.code, message: err.message };
            return { ...base, status: 'failed', error, files: [] };
          }
          // A path refused only now (a symlink leading out: PathRejectedError), or any other input the workspace
          // refuses while running: recorded denied and answered as the 400 it is.
          if (err instanceof InvalidInputError) return refusedWhileRunning(base, err);
          throw err;
        }
      },
    };
  }

  /**
   * A transfer of the file transfer API: only with the stream its edge attached (a request rebuilt from JSON, such as
   * a retry of a recorded transfer, has none and is refused), path-checked lexically before anything is recorded.
   */
  private prepareTransfer(request: FileTransferRequest, ctx: ActionContext): PreparedAction {
    if (!this.transfers.has(request)) {
      throw new InvalidInputError(
        'op',
        `op ${request.op} moves bytes of the file transfer API (…/files/content, …/files/archive); it cannot be sent or retried as an action`,
      );
    }
    const archive = request.op === 'upload_archive' || request.op === 'download_archive';
    const { rel } = resolveInside(ctx.workspaceDir, request.path, 'path', {
      allowEmpty: archive,
      rejectRoot: !archive,
    });
    return {
      tier: 'engine',
      risk: NO_RISK,
      run: (signal: AbortSignal): Promise<Outcome> => {
        const io = this.transfers.take(request);
        if (!io) throw new Error(`transfer ${request.op} ran twice`);
        return runTransfer(
          this.workspaces,
          ctx.session.id,
          request,
          io,
          { rel, actionId: ctx.actionId },
          signal,
        );
      },
    };
  }

  operation(request: FileActionRequest): string {
    return request.op;
  }

  summary(request: FileActionRequest): string {
    return `${request.op} ${request.path || '.'}${request.op === 'move' ? ` -> ${request.to}` : ''}`;
  }

  /** File operations hold nothing between actions. */
  async releaseSession(): Promise<void> {}
}
