import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { SESSION_EVENT_TYPES } from '../../state/events/session-event';

/** What the stream sends besides the session's own events: a resumed replay's gap, and the end of the stream. */
export const STREAM_EVENT_TYPES = ['events.gap', 'session.ended'] as const;

/** Response schemas of a session's event stream (`SessionEventType`, the `event` of its frames). */
export const EVENT_SCHEMAS = {
  SessionEventType: {
    type: 'string',
    description:
      'The type of an event of the stream: what the session published, or `events.gap` (a resumed replay lost ' +
      'events the buffer no longer held) and `session.ended` (the last one)',
    enum: [...SESSION_EVENT_TYPES, ...STREAM_EVENT_TYPES],
    example: 'action.completed',
  },
} satisfies Record<string, SchemaObject>;
