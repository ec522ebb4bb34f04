import { Controller, Get, Headers, Param, Query, Req, Res, UseGuards } from '@nestjs/common';
import { ApiBearerAuth, ApiHeader, ApiOkResponse, ApiOperation, ApiQuery, ApiTags } from '@nestjs/swagger';
import { ApiErrors, ApiV1Errors } from '../http/api-responses';
import { ref } from '../http/common.schemas';
import { InvalidInputError } from '@switchyard/common';
import type { Request, Response } from 'express';
import { ApiKeyGuard } from '../http/api-key.guard';
import { Tenant } from '../http/tenant.decorator';
import { SessionsService } from '../../session/sessions/sessions.service';
import { type EventGap, type SessionEvent, SessionEvents } from '../../session/events/session-events';

/** An event id, as `Last-Event-ID` or `?lastEventId=` give it (blanks around it are allowed). */
const LAST_EVENT_ID = '^[ \\t]*[0-9]{1,15}[ \\t]*$';

const HEARTBEAT_MS = 15_000;

const frame = (e: SessionEvent): string =>
  `id: ${e.id}\nevent: ${e.type}\ndata: ${JSON.stringify({ ...e.data, at: e.at })}\n\n`;

/**
 * `events.gap`, before the replay of a resumed stream whose next events the buffer no longer holds: their first and
 * last ids, so a client knows it lost them and re-reads what they reported. It has no id of its own, as it is no
 * event of the session: a client's `Last-Event-ID` stays at the last event it saw.
 */
const gapFrame = (sessionId: string, gap: EventGap): string => {
  const data = {
    ...gap,
    missing: gap.lastMissingId - gap.firstMissingId + 1,
    message:
      `events ${gap.firstMissingId} to ${gap.lastMissingId} are no longer buffered (SWITCHYARD_EVENTS_BUFFER); ` +
      `re-read what they reported: GET /v1/sessions/${sessionId}/actions`,
    at: new Date().toISOString(),
  };
  return `event: events.gap\ndata: ${JSON.stringify(data)}\n\n`;
};

@ApiTags('events')
@ApiBearerAuth()
@UseGuards(ApiKeyGuard)
@ApiV1Errors()
@Controller('v1/sessions/:sessionId/events')
export class EventsController {
  constructor(
    private readonly sessions: SessionsService,
    private readonly events: SessionEvents,
  ) {}

  @Get()
  @ApiOperation({
    summary: "Server-Sent Events of the session's actions and plans",
    description:
      '`action.started`, `action.output` (stdout/stderr chunks as they come), `action.completed`, `plan.step.*`, ' +
      '`plan.completed`. Each event has an id; reconnect with `Last-Event-ID` (or `?lastEventId=`) to get what ' +
      'was missed while it is still buffered (SWITCHYARD_EVENTS_BUFFER per session). When some of it no longer is, ' +
      'the replay starts with an `events.gap` event (no id) naming them: `{"firstMissingId","lastMissingId",' +
      '"missing","message"}`; re-read what they reported from the session\'s actions. The stream ends with the session.',
  })
  @ApiHeader({
    name: 'Last-Event-ID',
    required: false,
    schema: { type: 'string', pattern: LAST_EVENT_ID },
    description: 'Id of the last event received (an integer), as EventSource sends it on reconnecting',
  })
  @ApiQuery({
    name: 'lastEventId',
    required: false,
    schema: { type: 'string', pattern: LAST_EVENT_ID },
    description:
      'Id of the last event received (an integer); the `Last-Event-ID` header wins when both are sent',
  })
  // Set as content, not with @ApiProduces: the errors are JSON.
  @ApiOkResponse({
    description: 'The event stream, until the session ends',
    content: {
      'text/event-stream': {
        schema: {
          type: 'object',
          description:
            'One event of the stream (the schema of each, as SSE tools read it): `event` its type, `data` its JSON, ' +
            '`id` its number (none on `events.gap` and on `session.ended`, the last one); the first frame only sets ' +
            '`retry`',
          properties: {
            event: ref('SessionEventType'),
            data: {
              type: 'string',
              description: 'A JSON object',
              example: '{"actionId":"act_…","status":"succeeded"}',
            },
            id: { type: 'string', pattern: '^[0-9]+$' },
            retry: { type: 'integer', description: 'Milliseconds to wait before reconnecting' },
          },
        },
      },
    },
  })
  @ApiErrors(400, 404)
  stream(
    @Tenant() tenant: string,
    @Param('sessionId') sessionId: string,
    @Headers('last-event-id') lastEventHeader: string | undefined,
    @Query('lastEventId') lastEventQuery: string | undefined,
    @Req() req: Request,
    @Res() res: Response,
  ): void {
    this.sessions.get(tenant, sessionId);
    // Each is checked, though the header wins when both are sent.
    for (const [field, value] of [
      ['Last-Event-ID', lastEventHeader],
      ['lastEventId', lastEventQuery],
    ] as const) {
      if (value !== undefined && !new RegExp(LAST_EVENT_ID).test(value)) {
        throw new InvalidInputError(field, `${field} must be the id of an earlier event (an integer)`);
      }
    }
    const raw = lastEventHeader ?? lastEventQuery;
    const afterId = raw === undefined ? undefined : Number(raw.trim());

    res.status(200);
    res.setHeader('Content-Type', 'text/event-stream; charset=utf-8');
    res.setHeader('Cache-Control', 'no-cache, no-transform');
    res.setHeader('Connection', 'keep-alive');
    res.setHeader('X-Accel-Buffering', 'no');
    res.flushHeaders();

    let closed = false;
    const heartbeat = setInterval(() => res.write(': keep-alive\n\n'), HEARTBEAT_MS);
    heartbeat.unref();
    const close = () => {
      if (closed) return;
      closed = true;
      clearInterval(heartbeat);
      subscription.unsubscribe();
      res.end();
    };
    const subscription = this.events.subscribe(sessionId, afterId, {
      onEvent: (e) => {
        if (!closed) res.write(frame(e));
      },
      onEnd: () => {
        if (!closed) res.write('event: session.ended\ndata: {}\n\n');
        close();
      },
    });
    // Tell the client how to reconnect, and which events it lost that the buffer no longer holds.
    res.write('retry: 1000\n\n');
    if (subscription.gap) res.write(gapFrame(sessionId, subscription.gap));
    for (const e of subscription.replay) res.write(frame(e));
    req.on('close', close);
  }
}
