import { Injectable } from '@nestjs/common';
import { NO_RISK } from '@switchyard/common';
import { SessionKernels } from '@switchyard/sandbox';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
} from '../actions/action-handler.port';
import type { KernelActionRequest } from '../../state/actions/action-request';

/**
 * `kernel` actions: restart the session's kernel(s) of a language, recorded like any action so a reflection loop
 * sees where state was cleared. (Interrupting a running cell cannot wait its turn behind it: that is
 * `POST …/kernels/:kernelId/interrupt`.)
 */
@Injectable()
export class KernelActionHandler extends ActionHandler<KernelActionRequest> {
  readonly type = 'kernel' as const;

  constructor(private readonly kernels: SessionKernels) {
    super();
  }

  prepare(request: KernelActionRequest, ctx: ActionContext): PreparedAction {
    const base = { tier: 'engine' as const, risk: NO_RISK };
    return {
      ...base,
      run: async (): Promise<Outcome> => {
        const targets = this.kernels
          .list(ctx.session.id)
          .filter(
            (k) => k.language === request.language && (request.tier === undefined || k.tier === request.tier),
          );
        const kernels = [];
        for (const k of targets) kernels.push(await this.kernels.restart(ctx.session.id, k.id));
        const output =
          kernels.length > 0
            ? { kernels }
            : {
                kernels,
                message: `the session has no ${request.language} kernel${request.tier ? ` in the ${request.tier} tier` : ''}; its next state "session" cell starts a fresh one`,
              };
        return { ...base, status: 'succeeded', files: [], output };
      },
    };
  }

  operation(request: KernelActionRequest): string {
    return request.op;
  }

  summary(request: KernelActionRequest): string {
    return `restart ${request.language}${request.tier ? ` (${request.tier})` : ''}`;
  }

  /** Kernels belong to the sandbox manager's tiers, released with the code handler's session. */
  async releaseSession(): Promise<void> {}
}
