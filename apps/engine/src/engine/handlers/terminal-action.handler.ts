import { Injectable } from '@nestjs/common';
import {
  type ActionError,
  type ActionTier,
  InvalidInputError,
  NO_RISK,
  NotFoundError,
  type RiskAssessment,
} from '@switchyard/common';
import {
  buildChildEnv,
  egressEnv,
  isStatefulDecision,
  SandboxCapacityError,
  SandboxError,
  SandboxManager,
  SessionTerminals,
  type StatefulTier,
  TerminalClosedError,
  TerminalLimitError,
  type TerminalInfo,
  validateEnv,
} from '@switchyard/sandbox';
import { resolveInside } from '@switchyard/workspace';
import { SessionNetwork } from '../../gates/egress/session-network';
import { SessionTemplates, type TemplateRouting } from '../../session/templates/session-templates';
import type { TerminalActionRequest } from '../../state/actions/action-request';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
  refusedWhileRunning,
} from '../actions/action-handler.port';
import { oneLine } from './summary';
import { TerminalRequests } from './terminal-requests';

type Op<O extends TerminalActionRequest['op']> = Extract<TerminalActionRequest, { op: O }>;

/** The terminal as an answer shows it (its session is the action's). */
export function shownTerminal(info: TerminalInfo): Omit<TerminalInfo, 'sessionId'> {
  const { sessionId: _sessionId, ...rest } = info;
  return rest;
}

/** How long the terminal lived, from its opening to its end. */
const lifetimeMs = (info: TerminalInfo): number | undefined =>
  info.endedAt === undefined ? undefined : Date.parse(info.endedAt) - Date.parse(info.createdAt);

/** A refusal for lack of room (the session's terminals, the pool's containers): recorded `denied`, class `limit`. */
const limitDenial = (err: TerminalLimitError | SandboxCapacityError): ActionError => ({
  class: 'limit',
  code: err.code,
  message: err.message,
});

/**
 * Terminals of the session (`terminal` actions, made only by the terminals API): `open` starts a PTY running a login
 * bash in the session's stateful sandbox, routed as bash code is (its command scored when it has one; new state goes
 * where the session's state lives), under the session's policies (a terminal is bash to them); `close` ends one and
 * records what went through it. What is typed into a terminal is a person's, sent over its WebSocket: it is counted,
 * not scored or recorded keystroke by keystroke.
 */
@Injectable()
export class TerminalActionHandler extends ActionHandler<TerminalActionRequest> {
  readonly type = 'terminal' as const;

  constructor(
    private readonly sandbox: SandboxManager,
    private readonly terminals: SessionTerminals,
    private readonly network: SessionNetwork,
    private readonly templates: SessionTemplates,
    private readonly requests: TerminalRequests,
  ) {
    super();
  }

  prepare(request: TerminalActionRequest, ctx: ActionContext): PreparedAction {
    if (!this.requests.has(request)) {
      throw new InvalidInputError(
        'type',
        'a terminal is opened and closed with POST and DELETE /v1/sessions/{sessionId}/terminals; a terminal ' +
          'action cannot be sent or retried as an action',
      );
    }
    switch (request.op) {
      case 'open':
        return this.prepareOpen(request, ctx);
      case 'close':
        return this.prepareClose(request, ctx);
    }
  }

  operation(request: TerminalActionRequest): string {
    return request.op;
  }

  summary(request: TerminalActionRequest): string {
    switch (request.op) {
      case 'open':
        return oneLine(
          `open ${request.terminalId} ${request.cols}x${request.rows}` +
            (request.command === undefined ? '' : `: ${request.command}`),
        );
      case 'close':
        return `close ${request.terminalId}${request.reason === undefined ? '' : ` (${request.reason})`}`;
    }
  }

  releaseSession(sessionId: string): Promise<void> {
    return this.terminals.releaseSession(sessionId);
  }

  private prepareOpen(request: Op<'open'>, ctx: ActionContext): PreparedAction {
    if (request.cwd !== undefined) resolveInside(ctx.workspaceDir, request.cwd, 'cwd', { allowEmpty: true });
    const env = validateEnv(request.env);
    const template = this.templates.routing(ctx.session, ctx.minTier);
    // A login shell runs what a person types: nothing to score ahead but the command it may be given. The state
    // floor puts it with the session's kernels and processes (the pooled tier while it is available).
    const decision = this.sandbox.routeStateful(
      {
        actionId: ctx.actionId,
        sessionId: ctx.session.id,
        workspaceDir: ctx.workspaceDir,
        language: 'bash',
        code: request.command ?? 'exec bash -l',
      },
      template.minTier,
      template.floorReason,
    );
    const tier: ActionTier = decision.tier ?? 'none';
    const { risk } = decision;
    if (!isStatefulDecision(decision)) return { tier, risk, denial: decision.denial! };
    if (template.denial) return { tier, risk, denial: template.denial };
    try {
      this.terminals.checkOpen(ctx.session.id);
    } catch (err) {
      if (err instanceof TerminalLimitError) return { tier, risk, denial: limitDenial(err) };
      throw err;
    }
    const stateful = decision.tier;
    return {
      tier,
      risk,
      run: async (): Promise<Outcome> => {
        const unavailable =
          (await this.sandbox.unavailable(stateful)) ?? (await this.templates.notReady(template));
        if (unavailable) return { status: 'denied', tier, risk, error: unavailable, files: [] };
        try {
          return await this.open(request, ctx, env, stateful, template, { tier, risk });
        } catch (err) {
          // Opens submitted together all pass the check above; those past the limit by their turn are refused here.
          if (err instanceof TerminalLimitError || err instanceof SandboxCapacityError)
            return { status: 'denied', tier, risk, error: limitDenial(err), files: [] };
          // A directory only the sandbox can tell is missing: recorded denied, answered as the 400 it is.
          if (err instanceof InvalidInputError) return refusedWhileRunning({ tier, risk }, err);
          // A tier that turned out unavailable for this session (shutting down, its image has no root) refuses it as
          // one unavailable before would have: what a code action meets there too.
          if (err instanceof SandboxError && err.kind === 'unavailable') {
            const message = `tier "${stateful}" is not available: ${err.message}`;
            const error: ActionError = { class: 'policy', code: 'TIER_UNAVAILABLE', message };
            return { status: 'denied', tier, risk, error, files: [] };
          }
          throw err;
        }
      },
    };
  }

  private async open(
    request: Op<'open'>,
    ctx: ActionContext,
    env: Record<string, string>,
    stateful: StatefulTier,
    template: TemplateRouting,
    base: { tier: ActionTier; risk: RiskAssessment },
  ): Promise<Outcome> {
    // A pooled terminal of a session with network reaches its egress proxy; the subprocess tier stays offline.
    const egress = stateful === 'pooled' ? this.network.access(ctx.session) : undefined;
    const image = template.image;
    if (egress) await this.network.ready(ctx.session);
    const info = await this.terminals.open({
      id: request.terminalId,
      sessionId: ctx.session.id,
      cols: request.cols,
      rows: request.rows,
      ...(request.cwd !== undefined && { cwd: request.cwd }),
      ...(request.command !== undefined && { command: request.command }),
      env,
      baseEnv: {
        ...buildChildEnv({ ...this.sandbox.trustEnv(), ...image?.env }, 'bash'),
        ...(egress && egressEnv()),
      },
      tier: stateful,
      workspaceDir: ctx.workspaceDir,
      ...(egress && { egress }),
      ...(image && { image: image.ref }),
    });
    return {
      ...base,
      status: 'succeeded',
      output: { terminalId: info.id, terminal: shownTerminal(info) },
      files: [],
    };
  }

  /**
   * Closing a terminal, or recording the end of one that ended by itself (`reason`): what went through it (bytes
   * each way), how long it lived, how it ended.
   */
  private prepareClose(request: Op<'close'>, ctx: ActionContext): PreparedAction {
    let info: TerminalInfo;
    try {
      info = this.terminals.get(ctx.session.id, request.terminalId);
    } catch (err) {
      if (!(err instanceof NotFoundError)) throw err;
      const error: ActionError = {
        class: 'validation',
        code: 'TERMINAL_NOT_FOUND',
        message: `no terminal "${request.terminalId}" in this session`,
      };
      return {
        tier: 'engine',
        risk: NO_RISK,
        run: () => Promise.resolve({ status: 'failed', tier: 'engine', risk: NO_RISK, error, files: [] }),
      };
    }
    const base = { tier: info.tier, risk: NO_RISK };
    return {
      ...base,
      run: async (): Promise<Outcome> => {
        const ended =
          request.reason === undefined
            ? await this.terminals.close(ctx.session.id, request.terminalId).catch((err: unknown) => {
                // It ended on its own since the close was asked for: closed all the same.
                if (err instanceof TerminalClosedError)
                  return this.terminals.get(ctx.session.id, request.terminalId);
                throw err;
              })
            : this.terminals.get(ctx.session.id, request.terminalId);
        const durationMs = lifetimeMs(ended);
        return {
          ...base,
          status: 'succeeded',
          output: {
            terminalId: ended.id,
            terminal: shownTerminal(ended),
            ...(durationMs !== undefined && { durationMs }),
          },
          files: [],
        };
      },
    };
  }
}
