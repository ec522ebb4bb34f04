import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { ACTION_OUTPUT_SCHEMAS } from '../actions/action-output.schemas';
import { ACTION_SCHEMAS } from '../actions/action.schemas';
import { APPROVAL_SCHEMAS } from '../approvals/approval.schemas';
import { CHECKPOINT_SCHEMAS } from '../checkpoints/checkpoint.schemas';
import { EVENT_SCHEMAS } from '../events/event.schemas';
import { FILE_TRANSFER_SCHEMAS } from '../files/file-transfer.schemas';
import { GRAPH_SCHEMAS } from '../graph/graph.schemas';
import { HEALTH_SCHEMAS } from '../health/health.schemas';
import { HOOK_SCHEMAS } from '../hooks/hook.schemas';
import { JUPYTER_SCHEMAS } from '../jupyter/jupyter.schemas';
import { KERNEL_SCHEMAS } from '../kernels/kernel.schemas';
import { PLAN_SCHEMAS } from '../plans/plan.schemas';
import { POLICY_SCHEMAS } from '../policies/policy.schemas';
import { PORT_SCHEMAS } from '../ports/port.schemas';
import { SESSION_SCHEMAS } from '../sessions/session.schemas';
import { SKILL_SCHEMAS } from '../skills/skill.schemas';
import { TEMPLATE_SCHEMAS } from '../templates/template.schemas';
import { TERMINAL_SCHEMAS } from '../terminals/terminal.schemas';
import { TOOL_SCHEMAS } from '../tools/tool.schemas';
import { COMMON_SCHEMAS, ref } from './common.schemas';

/**
 * Schemas of the success bodies, registered in the OpenAPI document by `buildOpenApiDocument`. Written by hand from
 * the types the controllers return, one file per domain beside its controller (`*.schemas.ts`; shared pieces in
 * common.schemas.ts): a field is required only when the code always sends it. boot-config.e2e-spec.ts validates
 * real answers against them.
 */
export const RESPONSE_SCHEMAS = {
  ...COMMON_SCHEMAS,
  ...SESSION_SCHEMAS,
  ...ACTION_SCHEMAS,
  ...ACTION_OUTPUT_SCHEMAS,
  ...APPROVAL_SCHEMAS,
  ...POLICY_SCHEMAS,
  ...HOOK_SCHEMAS,
  ...SKILL_SCHEMAS,
  ...PLAN_SCHEMAS,
  ...GRAPH_SCHEMAS,
  ...CHECKPOINT_SCHEMAS,
  ...FILE_TRANSFER_SCHEMAS,
  ...EVENT_SCHEMAS,
  ...KERNEL_SCHEMAS,
  ...JUPYTER_SCHEMAS,
  ...TEMPLATE_SCHEMAS,
  ...TERMINAL_SCHEMAS,
  ...PORT_SCHEMAS,
  ...TOOL_SCHEMAS,
  ...HEALTH_SCHEMAS,
} satisfies Record<string, SchemaObject>;

export type ResponseSchemaName = keyof typeof RESPONSE_SCHEMAS;

/** A JSON body of the named schema, for `@ApiResponse` and its shorthands. */
export const jsonBody = (
  name: ResponseSchemaName,
): { content: { 'application/json': { schema: { $ref: string } } } } => ({
  content: { 'application/json': { schema: ref(name) } },
});
