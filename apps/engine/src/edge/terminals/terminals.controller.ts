import { Body, Controller, Delete, Get, HttpCode, Param, Post, Res, UseGuards } from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBearerAuth,
  ApiBody,
  ApiCreatedResponse,
  ApiOkResponse,
  ApiOperation,
  ApiTags,
} from '@nestjs/swagger';
import type { ActionResult } from '@switchyard/common';
import type { ApprovalRequest } from '@switchyard/context-graph';
import { newTerminalId, SessionTerminals, type TerminalInfo } from '@switchyard/sandbox';
import type { Response } from 'express';
import { ExecutionEngine } from '../../engine/actions/execution-engine.service';
import { TerminalRequests } from '../../engine/handlers/terminal-requests';
import { validateDto } from '../../platform/validation/validate-dto';
import { SessionsService } from '../../session/sessions/sessions.service';
import type { TerminalActionRequest } from '../../state/actions/action-request';
import type { Session } from '../../state/sessions/session.model';
import { AccessTokens } from '../http/access-tokens';
import { ApiKeyGuard } from '../http/api-key.guard';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import { schemaRef } from '../http/openapi';
import { RequestId } from '../http/request-id.decorator';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { OpenTerminalDto, TERMINAL_COLS, TERMINAL_ROWS } from './dto/open-terminal.dto';
import { ResizeTerminalDto } from './dto/resize-terminal.dto';
import { TERMINAL_TOKEN_SECONDS, TerminalTokenDto } from './dto/terminal-token.dto';
import { refusalOf } from './terminal-refusals';

/** A terminal as the REST answers show it: without its session (the path's), with its WebSocket's path. */
export type TerminalView = Omit<TerminalInfo, 'sessionId'> & { wsPath: string };

export const terminalWsPath = (sessionId: string, terminalId: string): string =>
  `/v1/sessions/${encodeURIComponent(sessionId)}/terminals/${encodeURIComponent(terminalId)}/ws`;

function view(info: TerminalInfo): TerminalView {
  const { sessionId, ...rest } = info;
  return { ...rest, wsPath: terminalWsPath(sessionId, info.id) };
}

interface AwaitingApproval {
  id: string;
  status: 'awaiting_approval';
  actionId: string;
  approval: ApprovalRequest;
  wsPath: string;
}

/**
 * A session's terminals: PTYs running a login bash in the session's sandbox, driven over their WebSocket
 * (`…/terminals/{id}/ws`, see `TerminalSockets`). Opening and closing one are `terminal` actions on the one path of
 * every action (policies: tool `terminal`, language `bash`; approvals; hooks; the graph; SSE); resizing and tokens act
 * at once, as a kernel's interrupt does. A policy `ask` answers 202 at once, as for any action: the terminal opens
 * when a person approves it.
 */
@ApiTags('terminals')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId/terminals')
export class TerminalsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly terminals: SessionTerminals,
    private readonly engine: ExecutionEngine,
    private readonly requests: TerminalRequests,
    private readonly tokens: AccessTokens,
  ) {}

  @Post()
  @ApiOperation({
    summary:
      "Open a terminal in the session's sandbox: a PTY running a login bash with the session's environment",
    description:
      'It runs where the session’s kernels and processes do (the pooled container while Docker is available), so ' +
      'it sees their files, packages and servers. 201 with the terminal and a short-lived token for its WebSocket. ' +
      'Recorded as a `terminal` action (op `open`); policies see tool `terminal`, language `bash`: a deny is a 403 ' +
      '(recorded denied), an `ask` a 202 (it opens once approved). 429 TERMINAL_LIMIT past ' +
      'SWITCHYARD_MAX_TERMINALS_PER_SESSION open terminals; 503 when the sandbox tier is unavailable or full.',
  })
  @ApiBody({ schema: schemaRef(OpenTerminalDto), required: false })
  @ApiCreatedResponse({ description: 'The terminal, open', ...jsonBody('OpenedTerminal') })
  @ApiAcceptedResponse({
    description: 'A policy asks for approval: it opens once approved',
    ...jsonBody('TerminalAwaitingApproval'),
  })
  @ApiBodyErrors()
  @ApiErrors(403, 404, 429, 503)
  async open(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
    @Res({ passthrough: true }) res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<
    (TerminalView & { token: string; tokenExpiresAt: string; actionId: string }) | AwaitingApproval
  > {
    const session = this.sessions.get(tenant, sessionId);
    const dto = validateDto(OpenTerminalDto, body === undefined ? {} : body);
    const request = this.requests.make<TerminalActionRequest>({
      type: 'terminal',
      op: 'open',
      terminalId: newTerminalId(),
      // `null` is absent, as for every optional field.
      cols: dto.cols ?? TERMINAL_COLS.default,
      rows: dto.rows ?? TERMINAL_ROWS.default,
      ...(dto.cwd != null && { cwd: dto.cwd }),
      ...(dto.command != null && { command: dto.command }),
      ...(dto.env != null && { env: dto.env }),
    });
    const answer = await this.submit(session, request, requestId);
    if ('approval' in answer) {
      res.status(202);
      return answer;
    }
    const info = this.terminals.get(sessionId, request.terminalId);
    const { token, expiresAt } = this.tokens.issue(
      { tenant },
      sessionId,
      `terminal:${info.id}`,
      TERMINAL_TOKEN_SECONDS.default,
    );
    res.status(201);
    return { ...view(info), token, tokenExpiresAt: expiresAt, actionId: answer.id };
  }

  @Get()
  @ApiOperation({ summary: "The session's terminals, open and ended (the ended without their output)" })
  @ApiOkResponse({ description: 'The terminals', ...jsonBody('TerminalList') })
  @ApiErrors(404)
  list(@Tenant() tenant: string, @Param('sessionId') sessionId: string): { terminals: TerminalView[] } {
    this.sessions.get(tenant, sessionId);
    return { terminals: this.terminals.list(sessionId).map(view) };
  }

  @Get(':terminalId')
  @ApiOperation({ summary: 'One terminal of the session: its size, bytes in and out, clients, how it ended' })
  @ApiOkResponse({ description: 'The terminal', ...jsonBody('Terminal') })
  @ApiErrors(404)
  get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('terminalId') terminalId: string,
  ): TerminalView {
    this.sessions.get(tenant, sessionId);
    return view(this.terminals.get(sessionId, terminalId));
  }

  @Post(':terminalId/resize')
  @HttpCode(200)
  @ApiOperation({
    summary: "Set a terminal's size (its programs get SIGWINCH); its WebSocket takes a resize message too",
    description: '409 TERMINAL_CLOSED once it has ended.',
  })
  @ApiBody({ schema: schemaRef(ResizeTerminalDto) })
  @ApiOkResponse({ description: 'The terminal, resized', ...jsonBody('Terminal') })
  @ApiBodyErrors()
  @ApiErrors(404, 409)
  async resize(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('terminalId') terminalId: string,
    @Body() body: unknown,
  ): Promise<TerminalView> {
    this.sessions.get(tenant, sessionId);
    const { cols, rows } = validateDto(ResizeTerminalDto, body);
    return view(await this.terminals.resize(sessionId, terminalId, cols, rows));
  }

  @Post(':terminalId/token')
  @HttpCode(200)
  @ApiOperation({
    summary:
      'A new short-lived token for the terminal’s WebSocket (`?token=`), e.g. to reconnect from a browser',
    description:
      'It opens this terminal’s WebSocket and nothing else. 409 TERMINAL_CLOSED once it has ended.',
  })
  @ApiBody({ schema: schemaRef(TerminalTokenDto), required: false })
  @ApiOkResponse({ description: 'The token', ...jsonBody('TerminalToken') })
  @ApiBodyErrors()
  @ApiErrors(404, 409)
  token(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('terminalId') terminalId: string,
    @Body() body: unknown,
  ): { token: string; expiresAt: string; wsPath: string } {
    this.sessions.get(tenant, sessionId);
    const { ttlSeconds } = validateDto(TerminalTokenDto, body === undefined ? {} : body);
    // A closed terminal takes no client: its token would open nothing (409).
    const info = this.terminals.getOpen(sessionId, terminalId);
    const issued = this.tokens.issue(
      { tenant },
      sessionId,
      `terminal:${info.id}`,
      ttlSeconds ?? TERMINAL_TOKEN_SECONDS.default,
    );
    return { ...issued, wsPath: terminalWsPath(sessionId, info.id) };
  }

  @Delete(':terminalId')
  @ApiOperation({
    summary: 'Close a terminal: SIGHUP to its shell and everything it started; answers once it has ended',
    description:
      'Recorded as a `terminal` action (op `close`, tool `terminal_close`) with the bytes that went in and out and ' +
      'how long it was open; its clients’ WebSockets close with code 1000. 409 TERMINAL_CLOSED when it has ' +
      'already ended.',
  })
  @ApiOkResponse({ description: 'The terminal, closed', ...jsonBody('ClosedTerminal') })
  @ApiAcceptedResponse({
    description: 'A policy asks for approval of `terminal_close`: it closes once approved',
    ...jsonBody('TerminalAwaitingApproval'),
  })
  @ApiErrors(403, 404, 409)
  async close(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('terminalId') terminalId: string,
    @Res({ passthrough: true }) res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<(TerminalView & { actionId: string }) | AwaitingApproval> {
    const session = this.sessions.get(tenant, sessionId);
    this.terminals.getOpen(sessionId, terminalId);
    const request = this.requests.make<TerminalActionRequest>({ type: 'terminal', op: 'close', terminalId });
    const answer = await this.submit(session, request, requestId);
    if ('approval' in answer) {
      res.status(202);
      return answer;
    }
    res.status(200);
    return { ...view(this.terminals.get(sessionId, terminalId)), actionId: answer.id };
  }

  /**
   * Submits a terminal action and waits for its end: answers its result when it succeeded, the 202 body when a
   * policy holds it for approval, and throws the error a refusal is answered with.
   */
  private async submit(
    session: Session,
    request: TerminalActionRequest,
    requestId: string | undefined,
  ): Promise<ActionResult | AwaitingApproval> {
    const submitted = await this.engine.submit(session, request, {
      ...(requestId !== undefined && { requestId }),
    });
    if (submitted.approval) {
      // A person decides when it runs: the answer cannot wait for that (as for every action).
      submitted.completion.catch(() => undefined);
      return {
        id: request.terminalId,
        status: 'awaiting_approval',
        actionId: submitted.id,
        approval: submitted.approval,
        wsPath: terminalWsPath(session.id, request.terminalId),
      };
    }
    const { result, inputRefusal } = await submitted.completion;
    if (inputRefusal) throw inputRefusal;
    if (result.status !== 'succeeded') throw refusalOf(result);
    return result;
  }
}
