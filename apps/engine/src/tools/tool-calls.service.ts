import { Injectable } from '@nestjs/common';
import { type ActionResult, type ActionType, SwitchyardError } from '@switchyard/common';
import { parseActionRequest } from '../actions/dto/action-body';
import { ExecutionEngine } from '../actions/execution-engine.service';
import { RequestValidationError } from '../http/request-validation.error';
import type { Session } from '../sessions/session.model';
import { SessionsService } from '../sessions/sessions.service';
import { ToolsService } from './tools.service';

/** The `tool_result` block to hand back to the model. */
export interface ToolResult {
  tool_use_id: string;
  content: string;
  is_error: boolean;
}

const TRUNCATED = '...(truncated)';

/**
 * Executes tool calls through the same path as REST actions (risk routing, graph records) and answers in tool-result
 * shape. Whatever is wrong with a call itself (unknown tool, bad input, refusal, timeout) is an `is_error` result a
 * model can act on, not an HTTP error.
 */
@Injectable()
export class ToolCallsService {
  constructor(
    private readonly tools: ToolsService,
    private readonly engine: ExecutionEngine,
    private readonly sessions: SessionsService,
  ) {}

  /** One call or an array of calls run in order. Throws only for an unknown session or a call without an id. */
  async run(tenant: string, sessionId: string, body: unknown): Promise<ToolResult | ToolResult[]> {
    const session = this.sessions.get(tenant, sessionId);
    if (Array.isArray(body)) {
      body.forEach((c, i) => envelopeId(c, `[${i}]`));
      const results: ToolResult[] = [];
      for (const call of body) results.push(await this.one(session, call));
      return results;
    }
    envelopeId(body, '');
    return this.one(session, body);
  }

  private async one(session: Session, raw: unknown): Promise<ToolResult> {
    // A model's call as Anthropic's `tool_use` block carries it (OpenAI's `tool_calls` map onto it).
    const call = raw as { id: string; name?: unknown; input?: unknown };
    const error = (content: string): ToolResult => ({ tool_use_id: call.id, content, is_error: true });
    const tool = typeof call.name === 'string' ? this.tools.find(call.name) : undefined;
    if (!tool) {
      return error(
        `unknown tool ${JSON.stringify(call.name)}; available tools: ${this.tools.names().join(', ')}`,
      );
    }
    const input = call.input ?? {};
    if (typeof input !== 'object' || input === null || Array.isArray(input)) {
      return error(`input must be a JSON object with the fields of ${tool.name}: ${tool.fields.join(', ')}`);
    }
    const unknown = Object.keys(input).filter((k) => !tool.fields.includes(k));
    if (unknown.length > 0) {
      return error(
        `invalid input for ${tool.name}: unknown field${unknown.length > 1 ? 's' : ''} ${unknown.join(', ')}; ` +
          `${tool.name} takes ${tool.fields.join(', ')}`,
      );
    }
    let result: ActionResult;
    try {
      const request = parseActionRequest(tool.toAction(input as Record<string, unknown>));
      const completion = await this.engine.run(session, request);
      // A refusal of the input found only while running reads like one found before it.
      if (completion.inputRefusal) throw completion.inputRefusal;
      result = completion.result;
    } catch (err) {
      if (err instanceof RequestValidationError) {
        return error(
          `invalid input for ${tool.name}: ` +
            err.problems.map((p) => `${tool.fieldOf(p.field)}: ${p.message}`).join('; '),
        );
      }
      if (err instanceof SwitchyardError) {
        const field = typeof err.details.field === 'string' ? `${tool.fieldOf(err.details.field)}: ` : '';
        return error(`${field}${err.message}`);
      }
      throw err;
    }
    return { tool_use_id: call.id, ...toContent(tool.kind, result) };
  }
}

/** The call's id, or a 400: without an id there is nothing to answer a model with. */
function envelopeId(call: unknown, at: string): string {
  const id = (call as { id?: unknown } | null)?.id;
  if (typeof call !== 'object' || call === null || typeof id !== 'string' || id.length === 0) {
    throw new RequestValidationError([
      {
        field: `${at ? `${at}.` : ''}id`,
        message: 'each tool call needs a non-empty string id (the tool_use id)',
      },
    ]);
  }
  return id;
}

function section(name: string, text: string | undefined, truncated = false): string[] {
  if (!text && !truncated) return [];
  return [`[${name}]\n${text ?? ''}${truncated ? TRUNCATED : ''}`];
}

/** `[stdout]…[stderr]…[exit_code]…` for code, the op's output for files; engine failures lead with `[error]`. */
export function toContent(kind: ActionType, r: ActionResult): Omit<ToolResult, 'tool_use_id'> {
  const failed = r.status !== 'succeeded';
  const parts: string[] = [];
  if (r.error && r.status !== 'failed') parts.push(`[error]\n${r.status}: ${r.error.message}`);
  if (kind === 'code') {
    parts.push(...section('stdout', r.stdout, r.truncated.stdout));
    parts.push(...section('stderr', r.stderr, r.truncated.stderr));
    const { result, note } = (r.output ?? {}) as { result?: unknown; note?: unknown };
    if (typeof result === 'string') parts.push(`[result]\n${result}`);
    if (typeof note === 'string') parts.push(`[note]\n${note}`);
    if (r.exitCode !== undefined) parts.push(`[exit_code]\n${r.exitCode}`);
  } else if (r.error && r.status === 'failed') {
    parts.push(`[error]\n${r.error.message}`);
    if (r.output !== undefined) parts.push(JSON.stringify(r.output));
  } else if (r.output !== undefined) {
    const out = r.output as { content?: unknown; truncated?: unknown };
    if (
      typeof out.content === 'string' &&
      Object.keys(out).every((k) =>
        ['content', 'truncated', 'path', 'lines', 'totalLines', 'offset', 'encoding', 'size'].includes(k),
      )
    ) {
      parts.push(`${out.content}${out.truncated === true ? TRUNCATED : ''}`);
    } else {
      parts.push(JSON.stringify(r.output));
    }
  }
  for (const hint of r.hints ?? []) parts.push(`[hint]\n${hint}`);
  return { content: parts.join('\n') || '(no output)', is_error: failed };
}
