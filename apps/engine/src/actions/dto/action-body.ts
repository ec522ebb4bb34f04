import { ACTION_TYPES } from '@switchyard/common';
import { FILE_OPS } from '@switchyard/workspace';
import type { ActionRequest } from '../action-request';
import { RequestValidationError } from '../../http/request-validation.error';
import { validateDto } from '../../http/validate-dto';
import { BROWSER_ACTION_DTOS, BROWSER_OPS, type BrowserActionDto } from './browser-action.dto';
import { CodeActionDto } from './code-action.dto';
import { FILE_ACTION_DTOS, type FileActionDto } from './file-action.dto';

export type ActionBody = CodeActionDto | FileActionDto | BrowserActionDto;

const isOneOf = <T extends string>(list: readonly T[], v: unknown): v is T =>
  typeof v === 'string' && (list as readonly string[]).includes(v);

/** Validates a POST …/actions body: a union discriminated on `type` (and `op` for files and browsers). */
export function parseActionBody(body: unknown): ActionBody {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) {
    throw new RequestValidationError([{ field: 'body', message: 'must be a JSON object' }]);
  }
  const { type, op } = body as { type?: unknown; op?: unknown };
  if (!isOneOf(ACTION_TYPES, type)) {
    throw new RequestValidationError([
      { field: 'type', message: `must be one of ${ACTION_TYPES.join(', ')}` },
    ]);
  }
  switch (type) {
    case 'code':
      return validateDto(CodeActionDto, body);
    case 'browser':
      if (!isOneOf(BROWSER_OPS, op)) {
        throw new RequestValidationError([
          { field: 'op', message: `must be one of ${BROWSER_OPS.join(', ')}` },
        ]);
      }
      return validateDto<BrowserActionDto>(BROWSER_ACTION_DTOS[op], body);
    case 'file':
      if (!isOneOf(FILE_OPS, op)) {
        throw new RequestValidationError([{ field: 'op', message: `must be one of ${FILE_OPS.join(', ')}` }]);
      }
      return validateDto<FileActionDto>(FILE_ACTION_DTOS[op], body);
  }
}

/**
 * The HTTP edge's one conversion: an untrusted body, validated (400 naming every field at fault), as the engine's
 * request type. The validated DTO's own fields are exactly the request's, so the request is a plain copy of them.
 */
export function parseActionRequest(body: unknown): ActionRequest {
  return { ...parseActionBody(body) };
}

export const ACTION_DTO_CLASSES = [
  CodeActionDto,
  ...Object.values(BROWSER_ACTION_DTOS),
  ...Object.values(FILE_ACTION_DTOS),
];
