import { Inject, Injectable } from '@nestjs/common';
import { type ActionResult, InvalidInputError, SwitchyardError } from '@switchyard/common';
import { asCallOf } from '@switchyard/sandbox';
import { randomBytes } from 'node:crypto';
import * as path from 'node:path';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { skillCode } from '../skills/skill-body';
import { callRequest } from '../skills/skill-calls';
import { type ChannelRequest, SkillChannel } from '../skills/skill-channel';
import { SkillRegistry, UnknownSkillError } from '../skills/skill-registry';
import { violation } from '../skills/skill-schemas';
import {
  type ActionContext,
  ActionHandler,
  type Outcome,
  type PreparedAction,
} from '../actions/action-handler.port';
import type { SkillActionRequest } from '../../state/actions/action-request';
import { CodeActionHandler } from './code-action.handler';
import { oneLine } from './summary';

/** What a nested call answers the body: the called action's result, in short. */
function callResult(r: ActionResult): Record<string, unknown> {
  return {
    actionId: r.id,
    status: r.status,
    ...(r.exitCode !== undefined && { exitCode: r.exitCode }),
    ...(r.stdout !== undefined && { stdout: r.stdout }),
    ...(r.stderr !== undefined && { stderr: r.stderr }),
    ...(r.output !== undefined && { output: r.output }),
    ...(r.error && { error: r.error }),
  };
}

/**
 * Skills: the input is checked against the skill's input schema (400 naming the path), the body runs as a fresh code
 * action routed by its own risk, with a channel back to the engine for its `ctx.call`s — each one an action of the
 * session, one level deeper, linked by CALLED_BY and decided by the same policies — and what it returns is checked
 * against the output schema.
 */
@Injectable()
export class SkillActionHandler extends ActionHandler<SkillActionRequest> {
  readonly type = 'skill' as const;
  private readonly channelRoot: string;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    private readonly skills: SkillRegistry,
    private readonly code: CodeActionHandler,
  ) {
    super();
    this.channelRoot = path.join(config.dataDir, 'run', 'skills');
  }

  prepare(request: SkillActionRequest, ctx: ActionContext): PreparedAction {
    const tenant = ctx.session.tenant;
    const skill = this.skills.find(tenant, request.name);
    if (!skill) throw new UnknownSkillError(request.name);
    const bad = violation(skill.inputSchema, request.input, 'input');
    if (bad) {
      throw new InvalidInputError(
        bad.path,
        `${bad.path} ${bad.message} (the skill's inputSchema at ${bad.schemaPath})`,
        'SKILL_INPUT_INVALID',
        {
          schemaPath: bad.schemaPath,
        },
      );
    }
    let returned: { value: unknown } | undefined;
    const channel = new SkillChannel(
      path.join(this.channelRoot, `${ctx.actionId}-${randomBytes(4).toString('hex')}`),
      async (message: ChannelRequest): Promise<Record<string, unknown>> => {
        switch (message.op) {
          case 'input':
            return { ok: true, input: request.input };
          case 'return':
            returned ??= { value: message.output ?? null };
            return { ok: true };
          case 'call':
            return this.call(ctx, message.name, message.input);
          default:
            return {
              ok: false,
              error: { code: 'BAD_REQUEST', message: `unknown op ${JSON.stringify(message.op)}` },
            };
        }
      },
    );
    const body = this.code.prepareCode(
      {
        language: skill.language,
        code: skillCode(skill),
        state: 'fresh',
        ...(skill.timeoutMs !== undefined && { timeoutMs: skill.timeoutMs }),
      },
      ctx,
      channel,
    );
    if (body.denial) return { ...body, language: skill.language };
    return {
      tier: body.tier,
      risk: body.risk,
      language: skill.language,
      run: async (signal): Promise<Outcome> => {
        await channel.open();
        let outcome: Outcome;
        try {
          outcome = await body.run(signal);
        } finally {
          await channel.close();
        }
        if (outcome.status !== 'succeeded') return outcome;
        if (!returned) {
          return {
            ...outcome,
            status: 'failed',
            error: {
              class: 'validation',
              code: 'SKILL_NO_OUTPUT',
              message: `skill ${skill.name} ended without returning: its main(input, ctx) must return its output`,
            },
          };
        }
        const wrong = violation(skill.outputSchema, returned.value, 'output');
        if (wrong) {
          return {
            ...outcome,
            status: 'failed',
            output: { skill: skill.name, value: returned.value },
            error: {
              class: 'validation',
              code: 'SKILL_OUTPUT_INVALID',
              message: `skill ${skill.name} returned ${wrong.path} that ${wrong.message} (its outputSchema at ${wrong.schemaPath})`,
            },
          };
        }
        return { ...outcome, output: { skill: skill.name, value: returned.value } };
      },
    };
  }

  /**
   * One `ctx.call`: the named tool or skill, run as an action of the session called by this one. It runs as this
   * action's call (`asCallOf`): a sandbox this action's own run holds serves it beside that run instead of queueing it
   * behind the run that waits for it (a Kubernetes session pod).
   */
  private async call(ctx: ActionContext, name: unknown, input: unknown): Promise<Record<string, unknown>> {
    const request = callRequest(name, input, (n) => this.skills.find(ctx.session.tenant, n) !== undefined);
    if (!('type' in request)) return { ok: false, error: request };
    try {
      const { completion } = await asCallOf(ctx.actionId, () => ctx.call(request));
      const { result, inputRefusal } = await completion;
      if (inputRefusal)
        return { ok: false, error: { code: inputRefusal.code, message: inputRefusal.message } };
      return { ok: true, result: callResult(result) };
    } catch (err) {
      if (err instanceof SwitchyardError) {
        const field = typeof err.details.field === 'string' ? `${err.details.field}: ` : '';
        return { ok: false, error: { code: err.code, message: `${field}${err.message}` } };
      }
      throw err;
    }
  }

  operation(request: SkillActionRequest): string {
    return request.name;
  }

  summary(request: SkillActionRequest): string {
    return `skill ${request.name}: ${oneLine(JSON.stringify(request.input))}`;
  }

  releaseSession(): Promise<void> {
    return Promise.resolve();
  }
}
