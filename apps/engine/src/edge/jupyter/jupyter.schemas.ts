import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { object, ref, TIMESTAMP } from '../http/common.schemas';
import { KERNELSPEC_NAMES } from './jupyter-kernelspecs';

/** Response schemas of the Jupyter protocol's REST routes: Jupyter's own shapes (snake_case, as its clients read). */

const SPEC_NAME: SchemaObject = { type: 'string', enum: [...KERNELSPEC_NAMES] };

const JUPYTER_KERNEL_SCHEMA: SchemaObject = object(
  ['id', 'name', 'last_activity', 'execution_state', 'connections'],
  {
    id: {
      type: 'string',
      format: 'uuid',
      description: 'The Jupyter kernel id (a UUID, not the session kernel’s)',
    },
    name: SPEC_NAME,
    last_activity: TIMESTAMP,
    execution_state: {
      type: 'string',
      enum: ['idle', 'busy'],
      description: 'busy while it handles a request, or while its session kernel runs a cell from anywhere',
    },
    connections: { type: 'integer', description: 'Open `channels` WebSockets' },
  },
  'A Jupyter kernel: a handle onto the session kernel of its language (state shared with REST and MCP)',
);

const JUPYTER_KERNELSPEC_SCHEMA: SchemaObject = object(
  ['name', 'spec', 'resources'],
  {
    name: SPEC_NAME,
    spec: object(['argv', 'display_name', 'language', 'interrupt_mode', 'env', 'metadata'], {
      argv: { type: 'array', items: { type: 'string' }, description: 'Empty: nothing is launched from it' },
      display_name: { type: 'string', example: 'Python 3 (Switchyard)' },
      language: { type: 'string', example: 'python' },
      interrupt_mode: { type: 'string', enum: ['signal', 'message'] },
      env: { type: 'object', additionalProperties: { type: 'string' } },
      metadata: { type: 'object', additionalProperties: true },
    }),
    resources: { type: 'object', additionalProperties: { type: 'string' }, description: 'None (no logos)' },
  },
  'A kernelspec: one per language of the session kernels',
);

export const JUPYTER_SCHEMAS = {
  JupyterKernel: JUPYTER_KERNEL_SCHEMA,
  JupyterKernelList: { type: 'array', items: ref('JupyterKernel') },
  JupyterKernelspec: JUPYTER_KERNELSPEC_SCHEMA,
  JupyterKernelspecs: object(['default', 'kernelspecs'], {
    default: SPEC_NAME,
    kernelspecs: { type: 'object', additionalProperties: ref('JupyterKernelspec') },
  }),
} satisfies Record<string, SchemaObject>;
