import { ACTION_TYPES } from '@switchyard/common';
import type { ActionRequest } from '../../../state/actions/action-request';
import { RequestValidationError } from '../../../platform/validation/request-validation.error';
import { validateDto } from '../../../platform/validation/validate-dto';
import { BROWSER_ACTION_DTOS, type BrowserActionDto } from './browser-action.dto';
import { CodeActionDto } from './code-action.dto';
import { FILE_ACTION_DTOS, type FileActionDto } from './file-action.dto';
import { KERNEL_ACTION_DTOS, type KernelActionDto } from './kernel-action.dto';
import { PROCESS_ACTION_DTOS, type ProcessActionDto } from './process-action.dto';
import { SkillActionDto } from './skill-action.dto';

export type ActionBody =
  CodeActionDto | FileActionDto | BrowserActionDto | ProcessActionDto | KernelActionDto | SkillActionDto;

/** Action types whose body is further discriminated on `op`, with one validation class per op. */
const OP_DTOS: Record<Exclude<ActionBody['type'], 'code' | 'skill'>, Record<string, new () => object>> = {
  file: FILE_ACTION_DTOS,
  browser: BROWSER_ACTION_DTOS,
  process: PROCESS_ACTION_DTOS,
  kernel: KERNEL_ACTION_DTOS,
};

const isOneOf = <T extends string>(list: readonly T[], v: unknown): v is T =>
  typeof v === 'string' && (list as readonly string[]).includes(v);

/** The types an action body may name: a terminal lives with its WebSocket, opened through its own API. */
const BODY_TYPES = ACTION_TYPES.filter((t): t is ActionBody['type'] => t !== 'terminal');

/** Validates a POST …/actions body: a union discriminated on `type` (and `op` for every type but code). */
export function parseActionBody(body: unknown): ActionBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RequestValidationError([{ field: 'body', message: 'must be a JSON object' }]);
  }
  const { type, op } = body as { type?: unknown; op?: unknown };
  if (type === 'terminal') {
    throw new RequestValidationError([
      {
        field: 'type',
        message:
          'terminal actions are opened and closed with POST and DELETE /v1/sessions/{sessionId}/terminals',
      },
    ]);
  }
  if (!isOneOf(BODY_TYPES, type)) {
    throw new RequestValidationError([{ field: 'type', message: `must be one of ${BODY_TYPES.join(', ')}` }]);
  }
  if (type === 'code') return validateDto(CodeActionDto, body);
  if (type === 'skill') return validateDto(SkillActionDto, body);
  const ops = OP_DTOS[type];
  if (typeof op !== 'string' || !Object.hasOwn(ops, op)) {
    throw new RequestValidationError([
      { field: 'op', message: `must be one of ${Object.keys(ops).join(', ')}` },
    ]);
  }
  return validateDto(ops[op], body) as ActionBody;
}

/**
 * The HTTP edge's one conversion: an untrusted body, validated (400 naming every field at fault), as the engine's
 * request type. The validated DTO's own fields are exactly the request's, so the request is a plain copy of them.
 */
export function parseActionRequest(body: unknown): ActionRequest {
  const dto = parseActionBody(body);
  // A skill's input is its own schema's to check: absent means empty.
  if (dto.type === 'skill') return { type: 'skill', name: dto.name, input: dto.input ?? {} };
  return { ...dto };
}

export const ACTION_DTO_CLASSES = [
  CodeActionDto,
  SkillActionDto,
  ...Object.values(OP_DTOS).flatMap((ops) => Object.values(ops)),
];
