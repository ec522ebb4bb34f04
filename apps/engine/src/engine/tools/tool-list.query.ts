import {
  type FieldProblem,
  RequestValidationError,
} from '../../platform/validation/request-validation.error';

/** The shape a tool list is written in: each API's own, and OpenAI's strict mode (`strict=true`). */
export type ToolFormat = 'anthropic' | 'openai' | 'openai-strict';

/**
 * `GET /v1/tools?format=anthropic|openai&strict=true|false` as the format to write, or a 400 naming every query field
 * at fault. `strict` is OpenAI's notion (Anthropic takes the schemas as they are), so `strict=true` needs
 * `format=openai`; `strict=false` is the default and goes with either.
 */
export function parseToolListQuery(format: unknown, strict: unknown): ToolFormat {
  const problems: FieldProblem[] = [];
  const f = format ?? 'anthropic';
  if (f !== 'anthropic' && f !== 'openai')
    problems.push({ field: 'format', message: 'must be anthropic or openai' });
  if (strict !== undefined && strict !== 'true' && strict !== 'false') {
    problems.push({ field: 'strict', message: 'must be true or false' });
  } else if (strict === 'true' && f !== 'openai') {
    problems.push({
      field: 'strict',
      message:
        "true is only for format=openai (OpenAI's strict mode); Anthropic takes the schemas as they are",
    });
  }
  if (problems.length > 0) throw new RequestValidationError(problems);
  return f === 'openai' && strict === 'true' ? 'openai-strict' : (f as 'anthropic' | 'openai');
}
