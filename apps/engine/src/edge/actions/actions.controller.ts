import {
  applyDecorators,
  Body,
  Controller,
  Get,
  Headers,
  HttpCode,
  Param,
  Post,
  Query,
  Res,
  UseGuards,
} from '@nestjs/common';
import {
  ApiAcceptedResponse,
  ApiBearerAuth,
  ApiBody,
  ApiOkResponse,
  ApiOperation,
  ApiQuery,
  ApiTags,
} from '@nestjs/swagger';
import { ApiBodyErrors, ApiErrors, ApiV1Errors } from '../http/api-responses';
import type { ActionResult, ActionType } from '@switchyard/common';
import { InvalidInputError, NotFoundError } from '@switchyard/common';
import type { Response } from 'express';
import { RequestId } from '../http/request-id.decorator';
import { IdempotencyService, sendIdempotentStatus } from '../../engine/idempotency/idempotency.service';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import { type ApprovalRequest, ContextGraph } from '@switchyard/context-graph';
import { ApiKeyGuard } from '../http/api-key.guard';
import { schemaRef } from '../http/openapi';
import { jsonBody } from '../http/response-schemas';
import { Tenant } from '../http/tenant.decorator';
import { validateDto } from '../../platform/validation/validate-dto';
import { SessionsService } from '../../session/sessions/sessions.service';
import { type ActionView, toActionView } from '../../engine/actions/action.view';
import { ACTION_DTO_CLASSES, parseActionRequest } from '../../engine/actions/dto/action-body';
import { ListActionsQuery } from './dto/list-actions.query';
import { RetryActionDto } from '../../engine/actions/dto/retry-action.dto';
import { ExecutionEngine, type SubmittedAction } from '../../engine/actions/execution-engine.service';
import { ApiIdempotencyKey } from '../../engine/idempotency/api-idempotency-key';

/**
 * Answer to `"wait": false`: the action is recorded and running (or queued); and to any action a policy rule holds
 * for approval (`awaiting_approval`, with when it expires).
 */
export interface AcceptedAction {
  id: string;
  sessionId: string;
  type: ActionType;
  status: 'running' | 'awaiting_approval';
  approval?: ApprovalRequest;
}

/** Where an action's answer leads: operations of the same action, by the ids in its body. */
const actionLink = (operationId: string, description: string) => ({
  operationId,
  parameters: { sessionId: '$response.body#/sessionId', actionId: '$response.body#/id' },
  description,
});

/** The lineage of a file the action touched: `path` is the JSON pointer to it in the answer's body. */
const lineageLink = (path: string, description: string) => ({
  operationId: 'GraphController_lineage',
  parameters: { sessionId: '$response.body#/sessionId', 'query.path': `$response.body#${path}` },
  description,
});

const ACTION_LINKS = {
  GetAction: actionLink('ActionsController_get', 'The action as recorded, with its input and files'),
  RetryAction: actionLink('ActionsController_retry', 'Run it again, revised or not'),
  GetFailureContext: actionLink('GraphController_context', 'What led to it: the failure context'),
  GetFileLineage: lineageLink('/output/path', 'Which actions wrote and read the file a file action named'),
};

/** What running an action answers, as run and retry document it: its result, or 202 with `"wait": false`. */
const ApiActionAnswers = (ended: string): MethodDecorator =>
  applyDecorators(
    ApiOkResponse({ description: ended, ...jsonBody('ActionResult'), links: ACTION_LINKS }),
    ApiAcceptedResponse({
      description: '`"wait": false`: recorded and running; or held for approval (`awaiting_approval`)',
      ...jsonBody('AcceptedAction'),
      links: {
        GetAction: ACTION_LINKS.GetAction,
        ApproveAction: actionLink('ApprovalsController_approve', 'Approve it, when it waits for approval'),
        RejectAction: actionLink('ApprovalsController_reject', 'Reject it, when it waits for approval'),
      },
    }),
    ApiBodyErrors(),
    ApiErrors(404, 409, 422, 429, 503),
  );

const accepted = ({ id, type, approval }: SubmittedAction, sessionId: string): AcceptedAction => ({
  id,
  sessionId,
  type,
  status: approval ? 'awaiting_approval' : 'running',
  ...(approval && { approval }),
});

/**
 * `wait` and `checkpoint` steer the request, not the action: taken out before the action body is validated (and not
 * part of the input the graph keeps and a retry reruns).
 */
function takeSteering(body: unknown): { wait: boolean; checkpoint?: 'before'; rest: unknown } {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { wait: true, rest: body };
  const { wait, checkpoint, ...rest } = body as Record<string, unknown>;
  // `null` means absent, as for every other field.
  if (wait !== undefined && wait !== null && typeof wait !== 'boolean') {
    throw new InvalidInputError('wait', 'wait must be a boolean');
  }
  if (checkpoint !== undefined && checkpoint !== null && checkpoint !== 'before') {
    throw new InvalidInputError('checkpoint', 'checkpoint must be "before" (checkpoint the workspace first)');
  }
  return {
    wait: typeof wait === 'boolean' ? wait : true,
    ...(checkpoint === 'before' && { checkpoint }),
    rest: 'wait' in body || 'checkpoint' in body ? rest : body,
  };
}

@ApiTags('actions')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId/actions')
export class ActionsController {
  constructor(
    private readonly engine: ExecutionEngine,
    private readonly sessions: SessionsService,
    private readonly graph: ContextGraph,
    private readonly idempotency: IdempotencyService,
    private readonly redactor: SecretRedactor,
  ) {}

  @Post()
  @ApiOperation({
    summary: 'Run one action and return its result',
    description:
      'HTTP 200 whatever the outcome: `status` tells how the action ended. With `"wait": false` in the body the ' +
      'answer is 202 with the action id as soon as it is recorded; poll `GET …/actions/:id` or follow ' +
      '`GET …/events`. An `Idempotency-Key` header makes a repeated request return the first answer instead of ' +
      'running again (422 when the key comes back with another body). 429 with `Retry-After` when the queue is full. ' +
      'With `"checkpoint": "before"` the workspace is checkpointed just before the action runs (`checkpoint` in the ' +
      'result): a retry with `restore: true` goes back to it.',
  })
  @ApiIdempotencyKey()
  @ApiBody({ schema: { oneOf: ACTION_DTO_CLASSES.map(schemaRef) } })
  @ApiActionAnswers('The action ended: its result (`status` says how)')
  async run(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<ActionResult | AcceptedAction> {
    // Session first: an unknown session is a 404 even when the body is also wrong.
    const session = this.sessions.get(tenant, sessionId);
    const { wait, checkpoint, rest } = takeSteering(body);
    const request = parseActionRequest(rest);
    return this.answer(
      res,
      { tenant, sessionId, key: idempotencyKey, path: `/v1/sessions/${sessionId}/actions`, body },
      wait,
      () =>
        this.engine.submit(session, request, { requestId, ...(checkpoint && { workspace: { checkpoint } }) }),
    );
  }

  @Post(':actionId/retry')
  @ApiOperation({
    summary: 'Run an action again, revised or not, linked to it by RETRY_OF',
    description:
      'A code retry never runs in a weaker tier than the original; `escalate` moves one tier up after a timeout or ' +
      'limit failure. `restore: true` first puts the workspace back to the checkpoint taken before the original ' +
      '(the undo of a reflection loop; 409 NO_CHECKPOINT when it had none, ACTIONS_RUNNING while other actions ' +
      'run). 409 past SWITCHYARD_MAX_RETRY_DEPTH or while the original still runs.',
  })
  @ApiIdempotencyKey()
  @ApiBody({ schema: schemaRef(RetryActionDto) })
  @ApiActionAnswers('The retry ended: its result')
  async retry(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
    @Body() body: unknown,
    @Headers('idempotency-key') idempotencyKey: string | undefined,
    @Res({ passthrough: true }) res: Response,
    @RequestId() requestId: string | undefined,
  ): Promise<ActionResult | AcceptedAction> {
    const session = this.sessions.get(tenant, sessionId);
    const { action, reason, escalate, wait, restore, checkpoint } = validateDto(
      RetryActionDto,
      body === undefined ? {} : body,
    );
    const revised = action === undefined ? undefined : parseActionRequest(action);
    return this.answer(
      res,
      {
        tenant,
        sessionId,
        key: idempotencyKey,
        path: `/v1/sessions/${sessionId}/actions/${actionId}/retry`,
        body,
      },
      wait !== false,
      () =>
        this.engine.retry(session, actionId, { revised, reason, escalate, requestId, restore, checkpoint }),
    );
  }

  @Post(':actionId/cancel')
  @HttpCode(200)
  @ApiOperation({
    summary: 'Stop a running or queued action',
    description: 'Answers with its result (status `cancelled`); 409 when it had already ended.',
  })
  @ApiOkResponse({
    description: 'The cancelled action',
    ...jsonBody('ActionResult'),
    links: { GetAction: ACTION_LINKS.GetAction, GetFailureContext: ACTION_LINKS.GetFailureContext },
  })
  @ApiErrors(404, 409)
  cancel(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
  ): Promise<ActionResult> {
    return this.engine.cancel(this.sessions.get(tenant, sessionId), actionId);
  }

  @Get()
  @ApiOperation({ summary: 'Timeline of the session, oldest first, paginated by cursor' })
  @ApiQuery({
    name: 'cursor',
    required: false,
    schema: { type: 'string', pattern: '^(0|[1-9][0-9]{0,14})$' },
    description:
      '`nextCursor` of the previous page: the seq of its last action, in decimal. The page holds the actions after ' +
      'that seq; a seq past the last action gives an empty page.',
  })
  @ApiQuery({
    name: 'limit',
    required: false,
    schema: { type: 'integer', minimum: 1, maximum: 1000, default: 100 },
    description: 'Actions per page',
  })
  @ApiOkResponse({
    description: 'A page of actions, with `nextCursor` when more follow',
    ...jsonBody('ActionPage'),
  })
  @ApiErrors(400, 404)
  async list(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Query() query: Record<string, unknown>,
  ): Promise<{ actions: ActionView[]; nextCursor?: string }> {
    const q = validateDto(ListActionsQuery, query);
    this.sessions.get(tenant, sessionId);
    const page = await this.graph.listActions(sessionId, { cursor: q.cursor, limit: q.limit ?? 100 });
    return {
      actions: page.items.map((r) => toActionView(r, false)),
      ...(page.nextCursor && { nextCursor: page.nextCursor }),
    };
  }

  @Get(':actionId')
  @ApiOperation({ summary: 'One action with its input and the files it touched' })
  @ApiOkResponse({
    description: 'The action',
    ...jsonBody('ActionView'),
    links: {
      GetFailureContext: ACTION_LINKS.GetFailureContext,
      GetFileLineage: lineageLink('/files/0/path', 'Which actions wrote and read the first file it touched'),
    },
  })
  @ApiErrors(404)
  async get(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Param('actionId') actionId: string,
  ): Promise<ActionView> {
    this.sessions.get(tenant, sessionId);
    const record = await this.graph.getAction(sessionId, actionId);
    if (!record)
      throw new NotFoundError(`action ${actionId} not found in session ${sessionId}`, { actionId });
    const view = toActionView(record, true);
    // The graph keeps the input as sent (a retry reruns it); what leaves the engine is redacted.
    if (view.input) view.input = this.redactor.value(view.input).value;
    return view;
  }

  /**
   * Submits once per idempotency key, then answers 200 with the result, or 202 at once for `wait: false` (nobody
   * awaits the result then: a refusal found while running is recorded as `denied` and shown by `GET …/:id`).
   */
  private async answer(
    res: Response,
    request: { tenant: string; sessionId: string; key: string | undefined; path: string; body: unknown },
    wait: boolean,
    submit: () => Promise<SubmittedAction>,
  ): Promise<ActionResult | AcceptedAction> {
    const answer = await this.idempotency.run<ActionResult | AcceptedAction>(
      request.tenant,
      request.key,
      { method: 'POST', path: request.path, body: request.body },
      async () => {
        const submitted = await submit();
        // A person decides when it runs: the answer cannot wait for that.
        if (wait && !submitted.approval) {
          const { result, inputRefusal } = await submitted.completion;
          // Recorded as denied; answered as the 4xx its input would have been had the lexical checks seen it.
          if (inputRefusal) throw inputRefusal;
          return { statusCode: 200, body: result };
        }
        submitted.completion.catch(() => undefined);
        return { statusCode: 202, body: accepted(submitted, request.sessionId) };
      },
    );
    return sendIdempotentStatus(res, answer);
  }
}
