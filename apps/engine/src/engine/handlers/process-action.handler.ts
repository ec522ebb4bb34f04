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
  ProcessLimitError,
  type ProcessInfo,
  SandboxManager,
  SessionProcesses,
  type StatefulTier,
  validateEnv,
} from '@switchyard/sandbox';
import { resolveInside } from '@switchyard/workspace';
import { SessionNetwork } from '../../gates/egress/session-network';
import { SessionTemplates, type TemplateRouting } from '../../session/templates/session-templates';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
} from '../actions/action-handler.port';
import type { ProcessActionRequest } from '../../state/actions/action-request';
import { oneLine } from './summary';

type Op<O extends ProcessActionRequest['op']> = Extract<ProcessActionRequest, { op: O }>;

const DEFAULT_STOP_GRACE_MS = 2000;

/**
 * Runs an op whose refusals only the live process can tell (it exited, its stdin is closed): those are recorded
 * `failed` with their code, like a file op on a missing file, never engine errors.
 */
async function refusalsFail(
  base: Pick<Outcome, 'tier' | 'risk'>,
  op: () => Promise<Pick<Outcome, 'status' | 'output' | 'error' | 'run' | 'startedProcess'>>,
): Promise<Outcome> {
  try {
    return { ...base, files: [], ...(await op()) };
  } catch (err) {
    if (!(err instanceof InvalidInputError || err instanceof NotFoundError)) throw err;
    const error: ActionError = { class: 'validation', code: err.code, message: err.message };
    return { ...base, files: [], status: 'failed', error };
  }
}

/** A session at its limit of processes: a refusal recorded `denied`, class `limit`, naming the setting to raise. */
const limitDenial = (err: ProcessLimitError): ActionError => ({
  class: 'limit',
  code: err.code,
  message: err.message,
});

/** The process as an answer shows it (its session is the action's). */
function shown(info: ProcessInfo): Omit<ProcessInfo, 'sessionId'> {
  const { sessionId: _sessionId, ...rest } = info;
  return rest;
}

/**
 * Background processes of the session (`process` actions): `start` a long-running command in the session's
 * stateful sandbox of the tier its risk routes to (scored as bash code, never weaker, never the one-off tier), then
 * `list`, `logs`, `write` (stdin, scored like the command, so a shell cannot be fed what the policy would refuse),
 * `signal`, `stop` and `wait` by id or name.
 */
@Injectable()
export class ProcessActionHandler extends ActionHandler<ProcessActionRequest> {
  readonly type = 'process' as const;

  constructor(
    private readonly sandbox: SandboxManager,
    private readonly processes: SessionProcesses,
    private readonly network: SessionNetwork,
    private readonly templates: SessionTemplates,
  ) {
    super();
  }

  prepare(request: ProcessActionRequest, ctx: ActionContext): PreparedAction {
    switch (request.op) {
      case 'start':
        return this.prepareStart(request, ctx);
      case 'list':
        return this.engineOp(async () => ({
          status: 'succeeded',
          output: { processes: this.processes.list(ctx.session.id).map(shown) },
        }));
      case 'write':
        return this.prepareWrite(request, ctx);
      case 'logs':
      case 'signal':
      case 'stop':
      case 'wait':
        return this.targetOp(request, ctx);
    }
  }

  operation(request: ProcessActionRequest): string {
    return request.op;
  }

  summary(request: ProcessActionRequest): string {
    switch (request.op) {
      case 'start':
        return oneLine(`start ${request.name ? `${request.name}: ` : ''}${request.command}`);
      case 'list':
        return 'list';
      case 'signal':
        return `signal ${request.signal} ${request.processId}`;
      case 'logs':
      case 'write':
      case 'stop':
      case 'wait':
        return `${request.op} ${request.processId}`;
    }
  }

  releaseSession(sessionId: string): Promise<void> {
    return this.processes.releaseSession(sessionId);
  }

  private prepareStart(request: Op<'start'>, ctx: ActionContext): PreparedAction {
    // Lexical checks are 400s, nothing recorded: the directory, the environment, a taken name.
    if (request.cwd !== undefined) resolveInside(ctx.workspaceDir, request.cwd, 'cwd', { allowEmpty: true });
    const env = validateEnv(request.env);
    // A template session's processes run in its template's image, in whichever tier.
    const template = this.templates.routing(ctx.session, ctx.minTier);
    const decision = this.sandbox.routeStateful(
      {
        actionId: ctx.actionId,
        sessionId: ctx.session.id,
        workspaceDir: ctx.workspaceDir,
        language: 'bash',
        code: request.command,
        ...(request.tier !== undefined && { tier: request.tier }),
      },
      template.minTier,
      template.floorReason,
    );
    const tier: ActionTier = decision.tier ?? 'none';
    const { risk } = decision;
    if (!isStatefulDecision(decision)) return { tier, risk, denial: decision.denial! };
    if (template.denial) return { tier, risk, denial: template.denial };
    try {
      // The limit only: a name in use is the session's state, not the request's fault. `start` checks it, and the
      // action fails with PROCESS_NAME_TAKEN, recorded like PROCESS_NOT_FOUND.
      this.processes.checkStart(ctx.session.id);
    } catch (err) {
      if (err instanceof ProcessLimitError) return { tier, risk, denial: limitDenial(err) };
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
          // A cwd that does not exist (only the sandbox can tell) fails like a file op on a missing path.
          return await refusalsFail({ tier, risk }, () => this.start(request, ctx, env, stateful, template));
        } catch (err) {
          // Starts submitted together all pass the check above; those that come to run once the others hold every
          // slot meet the limit here, and are refused as the check would have refused them.
          if (err instanceof ProcessLimitError)
            return { status: 'denied', tier, risk, error: limitDenial(err), files: [] };
          throw err;
        }
      },
    };
  }

  private async start(
    request: Op<'start'>,
    ctx: ActionContext,
    env: Record<string, string>,
    stateful: StatefulTier,
    template: TemplateRouting,
  ): Promise<Pick<Outcome, 'status' | 'output' | 'startedProcess'>> {
    // A pooled process of a session with network reaches its egress proxy; the subprocess tier stays offline.
    const egress = stateful === 'pooled' ? this.network.access(ctx.session) : undefined;
    const image = template.image;
    if (egress) await this.network.ready(ctx.session);
    const info = await this.processes.start({
      actionId: ctx.actionId,
      sessionId: ctx.session.id,
      command: request.command,
      ...(request.name !== undefined && { name: request.name }),
      ...(request.cwd !== undefined && { cwd: request.cwd }),
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
      status: 'succeeded',
      output: { processId: info.id, process: shown(info) },
      startedProcess: {
        id: info.id,
        ...(info.name !== undefined && { name: info.name }),
        command: info.command,
        tier: info.tier,
        startedAt: info.startedAt,
      },
    };
  }

  /** Text for a process's stdin may be commands for a shell: it is scored like the process's own command. */
  private prepareWrite(request: Op<'write'>, ctx: ActionContext): PreparedAction {
    const info = this.find(ctx.session.id, request.processId);
    if (!info) return this.notFound(request.processId);
    const decision = this.sandbox.routeStateful({
      actionId: ctx.actionId,
      sessionId: ctx.session.id,
      workspaceDir: ctx.workspaceDir,
      language: 'bash',
      code: request.data,
      tier: info.tier,
    });
    if (decision.denial) return { tier: info.tier, risk: decision.risk, denial: decision.denial };
    const risk = decision.risk;
    return {
      tier: info.tier,
      risk,
      run: (): Promise<Outcome> =>
        refusalsFail({ tier: info.tier, risk }, async () => {
          await this.processes.write(ctx.session.id, info.id, request.data, request.eof ?? false);
          return {
            status: 'succeeded',
            output: { processId: info.id, bytes: Buffer.byteLength(request.data), eof: request.eof ?? false },
          };
        }),
    };
  }

  /** `logs`, `signal`, `stop`, `wait`: an existing process, in the tier it runs in. */
  private targetOp(
    request: Exclude<ProcessActionRequest, Op<'start' | 'list' | 'write'>>,
    ctx: ActionContext,
  ): PreparedAction {
    const session = ctx.session.id;
    const info = this.find(session, request.processId);
    if (!info) return this.notFound(request.processId);
    const tier = info.tier;
    const base = { tier, risk: NO_RISK, files: [] };
    return {
      tier,
      risk: NO_RISK,
      run: (signal): Promise<Outcome> =>
        refusalsFail(base, () => this.target(request, session, info, signal)),
    };
  }

  private async target(
    request: Exclude<ProcessActionRequest, Op<'start' | 'list' | 'write'>>,
    session: string,
    info: ProcessInfo,
    signal: AbortSignal,
  ): Promise<Pick<Outcome, 'status' | 'output' | 'error' | 'run'>> {
    switch (request.op) {
      case 'logs': {
        const log = this.processes.logs(session, info.id, request);
        const text = (stream: 'stdout' | 'stderr') =>
          log.entries
            .filter((e) => e.stream === stream)
            .map((e) => e.text)
            .join('');
        return {
          status: 'succeeded',
          // What the log's buffer dropped is counted in `output.dropped`, not flagged as a run's truncation.
          run: {
            stdout: text('stdout'),
            stderr: text('stderr'),
            truncated: { stdout: false, stderr: false },
          },
          output: {
            processId: info.id,
            entries: log.entries,
            nextSeq: log.nextSeq,
            dropped: log.dropped,
            process: shown(log.info),
          },
        };
      }
      case 'signal': {
        const after = await this.processes.signal(session, info.id, request.signal);
        return {
          status: 'succeeded',
          output: { processId: info.id, signal: request.signal, process: shown(after) },
        };
      }
      case 'stop': {
        const after = await this.processes.stop(session, info.id, request.graceMs ?? DEFAULT_STOP_GRACE_MS);
        return { status: 'succeeded', output: { processId: info.id, process: shown(after) } };
      }
      case 'wait': {
        const { exited, info: after } = await this.processes.wait(
          session,
          info.id,
          request.timeoutMs,
          signal,
        );
        const output = { processId: info.id, exited, process: shown(after) };
        if (exited) return { status: 'succeeded', output };
        const error: ActionError = {
          class: 'timeout',
          code: 'PROCESS_STILL_RUNNING',
          message: `process ${info.id} was still running after ${request.timeoutMs} ms`,
        };
        return { status: 'timed_out', output, error };
      }
    }
  }

  private find(sessionId: string, idOrName: string): ProcessInfo | undefined {
    try {
      return this.processes.get(sessionId, idOrName);
    } catch (err) {
      if (err instanceof NotFoundError) return undefined;
      throw err;
    }
  }

  /** An op on a process the session never had: recorded `failed`, like a file op on a missing file. */
  private notFound(processId: string): PreparedAction {
    return this.engineOp(async () => ({
      status: 'failed',
      error: {
        class: 'validation',
        code: 'PROCESS_NOT_FOUND',
        message: `no process "${processId}" in this session (op list shows them)`,
      },
    }));
  }

  /** An op the engine answers itself, with no risk and no sandbox. */
  private engineOp(run: () => Promise<Pick<Outcome, 'status' | 'output' | 'error'>>): PreparedAction {
    const base: { tier: ActionTier; risk: RiskAssessment } = { tier: 'engine', risk: NO_RISK };
    return { ...base, run: async (): Promise<Outcome> => ({ ...base, files: [], ...(await run()) }) };
  }
}
