import { Injectable } from '@nestjs/common';
import { type ActionResult, SwitchyardError } from '@switchyard/common';
import { parseActionRequest } from '../actions/dto/action-body';
import { ExecutionEngine } from '../actions/execution-engine.service';
import type { ApprovalRequest } from '@switchyard/context-graph';
import { RequestValidationError } from '../../platform/validation/request-validation.error';
import type { Session } from '../../state/sessions/session.model';
import { SessionsService } from '../../session/sessions/sessions.service';
import { answerFor, type ToolAnswer } from './tool-answers';
import { callId, readToolCall, type ToolCall } from './tool-call-formats';
import { readToolInput } from './tool-input';
import { toolProblem } from './tool-input-errors';
import { textOutcome, type ToolOutcome } from './tool-outcome';
import { ToolResultContent } from './tool-result-content.service';
import { ToolsService } from './tools.service';

export type { ToolAnswer, ToolResult } from './tool-answers';
export type { ToolOutcome } from './tool-outcome';

/** Errors that refuse a call's input (4xx), as opposed to the engine's state or faults. */
const INPUT_KINDS: ReadonlySet<string> = new Set(['invalid_input', 'unprocessable', 'payload_too_large']);

/**
 * Executes tool calls through the same path as REST actions (risk routing, graph records) and answers each in its
 * API's result shape. Whatever is wrong with a call itself (unknown tool, bad input or arguments, refusal, timeout)
 * is an `is_error` result a model can act on, not an HTTP error.
 */
@Injectable()
export class ToolCallsService {
  constructor(
    private readonly tools: ToolsService,
    private readonly engine: ExecutionEngine,
    private readonly sessions: SessionsService,
    private readonly content: ToolResultContent,
  ) {}

  /** One call or an array of calls run in order. Throws only for an unknown session or a call without an id. */
  async run(tenant: string, sessionId: string, body: unknown): Promise<ToolAnswer | ToolAnswer[]> {
    const session = this.sessions.get(tenant, sessionId);
    if (Array.isArray(body)) {
      const calls = body.map((c, i) => readToolCall(c as Record<string, unknown>, callId(c, `[${i}]`)));
      const results: ToolAnswer[] = [];
      for (const call of calls) results.push(answerFor(call, await this.one(session, call)));
      return results;
    }
    const call = readToolCall(body as Record<string, unknown>, callId(body, ''));
    return answerFor(call, await this.one(session, call));
  }

  /**
   * One call of `name` with `input`, answered as its outcome (text and images, before any API's shape): what MCP
   * answers. Throws only for an unknown session.
   */
  async outcome(tenant: string, sessionId: string, name: unknown, input: unknown): Promise<ToolOutcome> {
    const session = this.sessions.get(tenant, sessionId);
    return this.one(session, { id: 'mcp', format: 'plain', name, input });
  }

  /**
   * What a call of `name` with `input` would be refused for before running (the `is_error` text: unknown tool, input
   * the tool or its action does not take), or undefined when it would be submitted; nothing is recorded or run.
   * A refusal by policy or risk is not an input problem: it is recorded `denied` when the call runs.
   */
  check(session: Session, name: string, input: unknown): string | undefined {
    const tool = this.tools.find(name, session.tenant);
    if (!tool) return `unknown tool ${JSON.stringify(name)}`;
    const reading = readToolInput(tool, input);
    if ('error' in reading) return reading.error;
    try {
      this.engine.check(session, parseActionRequest(tool.toAction(reading.input)));
    } catch (err) {
      if (err instanceof RequestValidationError) {
        return `invalid input for ${tool.name}: ${err.problems.map((p) => toolProblem(tool, p.field, p.message)).join('; ')}`;
      }
      // Input the engine does not take; not a missing dependency (503) or an engine fault.
      if (err instanceof SwitchyardError && INPUT_KINDS.has(err.kind)) {
        const field = typeof err.details.field === 'string' ? err.details.field : undefined;
        return toolProblem(tool, field, err.message);
      }
      throw err;
    }
    return undefined;
  }

  private async one(session: Session, call: ToolCall): Promise<ToolOutcome> {
    const error = (content: string): ToolOutcome => textOutcome(content, true);
    if (call.invalid && call.invalid.field !== 'arguments') {
      return error(`${call.invalid.field}: ${call.invalid.message}`);
    }
    const tool = typeof call.name === 'string' ? this.tools.find(call.name, session.tenant) : undefined;
    if (!tool) {
      return error(
        `unknown tool ${JSON.stringify(call.name)}; available tools: ${this.tools.names(session.tenant).join(', ')}`,
      );
    }
    if (call.invalid) {
      return error(
        `invalid arguments for ${tool.name}: ${call.invalid.message}; arguments is a JSON object (as a string) ` +
          `with the fields of ${tool.name}: ${tool.fields.join(', ')}`,
      );
    }
    const reading = readToolInput(tool, call.input);
    if ('error' in reading) return error(reading.error);
    let result: ActionResult;
    try {
      const request = parseActionRequest(tool.toAction(reading.input));
      const submitted = await this.engine.submit(session, request);
      // A person decides when it runs: the model hears at once, and can carry on or check back.
      if (submitted.approval) return pending(tool.name, session.id, submitted.id, submitted.approval);
      const completion = await submitted.completion;
      // A refusal of the input found only while running reads like one found before it.
      if (completion.inputRefusal) throw completion.inputRefusal;
      result = completion.result;
    } catch (err) {
      if (err instanceof RequestValidationError) {
        return error(
          `invalid input for ${tool.name}: ` +
            err.problems.map((p) => toolProblem(tool, p.field, p.message)).join('; '),
        );
      }
      if (err instanceof SwitchyardError) {
        const field = typeof err.details.field === 'string' ? err.details.field : undefined;
        return error(toolProblem(tool, field, err.message));
      }
      throw err;
    }
    return this.content.outcome(tool.kind, result);
  }
}

/** What a model reads when its call waits for a person: the action, why, until when, and where its result will be. */
function pending(tool: string, sessionId: string, actionId: string, approval: ApprovalRequest): ToolOutcome {
  const actions = `/v1/sessions/${sessionId}/actions/${actionId}`;
  return textOutcome(
    `[pending approval]\n${tool} was not run yet: it waits for a person's approval (action ${actionId}).\n` +
      `${approval.reasons[0]}.\n` +
      `It runs once approved (POST ${actions}/approve) and ends denied if rejected or not decided by ` +
      `${approval.expiresAt}. Its result: GET ${actions}. Carry on with other work, or ask the user to approve it.`,
    false,
  );
}
