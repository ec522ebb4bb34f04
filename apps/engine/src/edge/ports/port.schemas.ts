import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { nullable, object, ref, TIMESTAMP } from '../http/common.schemas';

/** Response schemas of a session's ports (`PortList`, `PortPreview`). */

const PORT = { type: 'integer', minimum: 1, maximum: 65535, example: 8000 } as const;

const LISTENING_PORT_SCHEMA: SchemaObject = object(
  ['port', 'address', 'tier', 'url'],
  {
    port: PORT,
    address: {
      type: 'string',
      description: 'The address it is bound to inside the sandbox: `127.0.0.1`, `0.0.0.0`, `::`…',
      example: '0.0.0.0',
    },
    tier: { type: 'string', enum: ['subprocess', 'pooled'], description: 'The sandbox it listens in' },
    process: nullable(
      object(
        ['id'],
        { id: { type: 'string', example: 'prc_0123456789abcdef' }, name: { type: 'string' } },
        'The background process whose process tree listens on it; null when none of the session’s is',
      ),
    ),
    kernel: nullable(
      object(
        ['id'],
        { id: { type: 'string' }, language: { type: 'string', enum: ['python', 'node', 'bash'] } },
        'The kernel whose process tree listens on it (a server started from a cell); null when none',
      ),
    ),
    url: {
      type: 'string',
      description: 'Its path through the engine’s proxy (with the bearer key, or a preview token)',
      example: '/v1/sessions/ses_0123456789abcdef01234567/ports/8000/',
    },
    host: {
      type: 'string',
      description: 'Its preview host, when the engine has a preview domain (SWITCHYARD_PREVIEW_DOMAIN)',
    },
  },
  'A TCP port something listens on in the session’s sandbox',
);

export const PORT_SCHEMAS = {
  ListeningPort: LISTENING_PORT_SCHEMA,
  PortList: object(
    ['ports'],
    { ports: { type: 'array', items: ref('ListeningPort'), description: 'By port' } },
    'The ports something listens on in the session’s sandboxes (empty when none runs)',
  ),
  PortPreview: object(
    ['url', 'token', 'expiresAt'],
    {
      url: {
        type: 'string',
        description:
          'The port through the path proxy with the token in `switchyard_token`: a browser opening it gets the token ' +
          'as a cookie for that path and is sent on without it',
        example: '/v1/sessions/ses_0123456789abcdef01234567/ports/8000/?switchyard_token=…',
      },
      token: {
        type: 'string',
        description: 'A signed token of scope `port:<port>` for this session; it opens nothing else',
      },
      expiresAt: TIMESTAMP,
      host: {
        type: 'string',
        description:
          'The preview host (`<port>-<sessionId>.<domain>`), when the engine has a preview domain: the app at `/`, ' +
          'on an origin of its own; open `https://<host>/?switchyard_token=<token>`',
      },
    },
    'A preview link to a port of the session',
  ),
} satisfies Record<string, SchemaObject>;
