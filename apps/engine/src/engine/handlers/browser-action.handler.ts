import { Inject, Injectable } from '@nestjs/common';
import { BrowserRouter, requestPaths } from '@switchyard/browser';
import { PathRejectedError, resolveInside } from '@switchyard/workspace';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
  refusedWhileRunning,
} from '../actions/action-handler.port';
import type { BrowserActionRequest } from '../../state/actions/action-request';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import { oneLine } from './summary';

/** Browser operations, run by the browser router in the session's browser context. */
@Injectable()
export class BrowserActionHandler extends ActionHandler<BrowserActionRequest> {
  readonly type = 'browser' as const;

  constructor(
    private readonly browser: BrowserRouter,
    private readonly workspaces: SessionWorkspaces,
    @Inject(ENGINE_CONFIG) private readonly config: EngineConfig,
  ) {
    super();
  }

  prepare(request: BrowserActionRequest, ctx: ActionContext): PreparedAction {
    const { type: _type, ...browserRequest } = request;
    // Lexical checks first, like file actions: traversal is a 400 and nothing is recorded.
    for (const p of requestPaths(browserRequest)) {
      resolveInside(ctx.workspaceDir, p.path, p.field, { rejectRoot: true });
    }
    // Refusals that need no DNS (scheme, address literals, evaluate off or critical) are recorded as denied.
    const { risk, denial } = this.browser.precheck(browserRequest);
    if (denial) return { tier: 'browser', risk, denial };
    return {
      tier: 'browser',
      risk,
      run: async (signal): Promise<Outcome> => {
        const sessionId = ctx.session.id;
        const maxBytes = this.config.browser.maxArtifactBytes;
        try {
          // The browser works on files of this host: an upload's file comes from the workspace first, and what the
          // op wrote goes back into it (both nothing to do when the workspace is this host's own directory).
          if (browserRequest.op === 'upload')
            await this.workspaces.pull(sessionId, [browserRequest.path], maxBytes);
          const job = {
            sessionId,
            workspaceDir: this.workspaces.hostDir(sessionId),
            request: browserRequest,
          };
          const out = await this.browser.execute(job, signal);
          const written = out.files.filter((f) => f.access === 'write').map((f) => f.path);
          await this.workspaces.push(sessionId, written, maxBytes);
          return { ...out, tier: 'browser', risk };
        } catch (err) {
          if (err instanceof PathRejectedError) return refusedWhileRunning({ tier: 'browser', risk }, err);
          throw err;
        }
      },
    };
  }

  operation(request: BrowserActionRequest): string {
    return request.op;
  }

  /** `navigate https://…`, `click #submit`: what the action is about. */
  summary(request: BrowserActionRequest): string {
    const target =
      ('url' in request && request.url) ||
      ('selector' in request && request.selector) ||
      ('path' in request && request.path) ||
      ('tabId' in request && request.tabId) ||
      ('mode' in request && request.mode) ||
      '';
    return oneLine(`${request.op} ${target}`);
  }

  releaseSession(sessionId: string): Promise<void> {
    return this.browser.releaseSession(sessionId);
  }
}
