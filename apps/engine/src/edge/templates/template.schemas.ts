import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { nullable, object, ref } from '../http/common.schemas';
import { PACKAGE_KINDS } from '../../session/templates/template-file';

/** Response schemas of the sandbox templates (`TemplateView`). */

const TEMPLATE_SCHEMA: SchemaObject = object(
  ['name', 'description', 'kind', 'state', 'packages', 'env'],
  {
    name: { type: 'string', example: 'data-science' },
    description: { type: 'string' },
    kind: {
      type: 'string',
      enum: ['packages', 'image'],
      description: '`packages`: built FROM the default sandbox image; `image`: an image used as is',
    },
    image: nullable({
      type: 'string',
      description:
        'The image sessions with it run in; null while it cannot be known (no default image yet, invalid)',
    }),
    state: {
      type: 'string',
      enum: ['ready', 'stale', 'missing', 'invalid', 'unknown'],
      description:
        '`stale`: the file or base image changed since the last build; `unknown`: Docker did not answer',
    },
    packages: object(
      [...PACKAGE_KINDS],
      Object.fromEntries(PACKAGE_KINDS.map((k) => [k, { type: 'array', items: { type: 'string' } }])),
    ),
    env: {
      type: 'object',
      additionalProperties: { type: 'string' },
      description: 'Set in the image and for every run of its sessions',
    },
    build: { type: 'string', description: 'The command that makes it ready, when it is not' },
    builtImage: { type: 'string', description: '`stale`: the older build Docker still has' },
    error: { type: 'string', description: '`invalid`, `unknown`: why' },
  },
  'A sandbox template sessions may pick, with its build state',
);

const TEMPLATE_LIST_SCHEMA: SchemaObject = object(['templates'], {
  templates: { type: 'array', items: ref('Template') },
});

export const TEMPLATE_SCHEMAS = {
  Template: TEMPLATE_SCHEMA,
  TemplateList: TEMPLATE_LIST_SCHEMA,
} satisfies Record<string, SchemaObject>;
