import { Injectable } from '@nestjs/common';
import { type CallChannel, type CodeSpec, isRunnable, SandboxManager } from '@switchyard/sandbox';
import { SessionNetwork } from '../../gates/egress/session-network';
import { SessionTemplates } from '../../session/templates/session-templates';
import { SessionWorkspaces } from '../../session/workspaces/session-workspaces';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
} from '../actions/action-handler.port';
import type { CodeActionRequest } from '../../state/actions/action-request';
import { oneLine } from './summary';

/** Code: scored and routed once by the sandbox manager, run in the tier it picked. */
@Injectable()
export class CodeActionHandler extends ActionHandler<CodeActionRequest> {
  readonly type = 'code' as const;

  constructor(
    private readonly sandbox: SandboxManager,
    private readonly workspaces: SessionWorkspaces,
    private readonly network: SessionNetwork,
    private readonly templates: SessionTemplates,
  ) {
    super();
  }

  prepare(request: CodeActionRequest, ctx: ActionContext): PreparedAction {
    const { type: _type, ...spec } = request;
    return this.prepareCode(spec, ctx);
  }

  /**
   * Scores and routes code once, for a code action or another kind that runs code (a skill's body, with the `channel`
   * its calls come back through).
   */
  prepareCode(spec: CodeSpec, ctx: ActionContext, channel?: CallChannel): PreparedAction {
    const egress = this.network.access(ctx.session);
    // A session's template: its image in every tier (the subprocess tier on its exported root).
    const template = this.templates.routing(ctx.session, ctx.minTier);
    const routed = this.sandbox.prepare(
      {
        ...spec,
        actionId: ctx.actionId,
        sessionId: ctx.session.id,
        workspaceDir: ctx.workspaceDir,
        ...(egress && { egress }),
        ...(template.image && { image: template.image }),
        ...(channel && { channel }),
      },
      { minTier: template.minTier, floorReason: template.floorReason },
    );
    const tier = routed.tier ?? 'none';
    if (!isRunnable(routed)) return { tier, risk: routed.risk, denial: routed.denial! };
    if (template.denial) return { tier, risk: routed.risk, denial: template.denial };
    return {
      tier,
      risk: routed.risk,
      run: async (signal): Promise<Outcome> => {
        // Whether the template's image is built is Docker's to say, when the action's turn comes.
        const notReady = await this.templates.notReady(template);
        if (notReady) return { status: 'denied', tier, risk: routed.risk, error: notReady, files: [] };
        // The files a run changed are found by comparing the workspace before and after it.
        if (egress) await this.network.ready(ctx.session);
        const before = await this.workspaces.snapshot(ctx.session.id);
        const out = await this.sandbox.execute(routed, signal, { onOutput: ctx.onOutput });
        // The run happened: a workspace that cannot be read after it (a Kubernetes pod the code left out of memory)
        // costs the list of files it changed, never its result.
        const after = await this.workspaces
          .snapshot(ctx.session.id, { afterRun: true })
          .catch((err: unknown) => err as Error);
        const unread = after instanceof Error;
        const hints = [
          ...(this.network.hints(ctx.session, { ...out.run, status: out.status }) ?? []),
          ...(unread
            ? [
                `the files this run changed are not listed: the workspace could not be read after it (${after.message})`,
              ]
            : []),
        ];
        return {
          status: out.status,
          tier: out.tier ?? tier,
          risk: out.risk,
          run: out.run,
          error: out.error,
          // A cell of a session kernel answers which kernel ran it and the value of its last expression.
          ...(out.kernel && {
            output: {
              kernel: out.kernel,
              ...(out.result !== undefined && { result: out.result }),
              results: out.results ?? [],
              ...(out.note !== undefined && { note: out.note }),
            },
            kernel: {
              id: out.kernel.id,
              language: out.kernel.language,
              tier: out.kernel.tier,
              executionCount: out.kernel.executionCount,
              started: out.kernel.started,
            },
          }),
          sandbox:
            out.containerId !== undefined && (out.tier === 'pooled' || out.tier === 'container')
              ? {
                  tier: out.tier,
                  containerId: out.containerId,
                  ...(out.runtime !== undefined && { runtime: out.runtime }),
                }
              : undefined,
          files: unread
            ? []
            : this.workspaces.changedPaths(before, after).map((path) => ({ path, access: 'write' as const })),
          ...(hints.length > 0 && { hints }),
        };
      },
    };
  }

  operation(request: CodeActionRequest): string {
    return request.language;
  }

  summary(request: CodeActionRequest): string {
    const state = request.state === 'session' ? ' (session kernel)' : '';
    return `${request.language}${state}: ${oneLine(request.code)}`;
  }

  releaseSession(sessionId: string): Promise<void> {
    return this.sandbox.releaseSession(sessionId);
  }
}
