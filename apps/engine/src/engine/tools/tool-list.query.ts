import {
  type FieldProblem,
  RequestValidationError,
} from '../../platform/validation/request-validation.error';

/**
 * The shape a tool list is written in: each API's own, and OpenAI's strict mode. Chat Completions (`openai`) is
 * non-strict unless `strict=true`; the Responses API (`openai-responses`) treats a function without `strict` as strict,
 * so its list is strict unless `strict=false`, and always says `strict` either way.
 */
export type ToolFormat =
  'anthropic' | 'openai' | 'openai-strict' | 'openai-responses' | 'openai-responses-strict';

const FORMATS = ['anthropic', 'openai', 'openai-responses'] as const;

/**
 * `GET /v1/tools?format=anthropic|openai|openai-responses&strict=true|false` as the format to write, or a 400 naming
 * every query field at fault. `strict` is OpenAI's notion (Anthropic takes the schemas as they are), so `strict=true`
 * needs an OpenAI format; `strict=false` goes with any. Its default is each API's own: false for Chat Completions,
 * true for the Responses API.
 */
export function parseToolListQuery(format: unknown, strict: unknown): ToolFormat {
  const problems: FieldProblem[] = [];
  const f = format ?? 'anthropic';
  if (!FORMATS.includes(f as (typeof FORMATS)[number]))
    problems.push({ field: 'format', message: 'must be anthropic, openai or openai-responses' });
  if (strict !== undefined && strict !== 'true' && strict !== 'false') {
    problems.push({ field: 'strict', message: 'must be true or false' });
  } else if (strict === 'true' && f !== 'openai' && f !== 'openai-responses') {
    problems.push({
      field: 'strict',
      message:
        "true is only for format=openai or openai-responses (OpenAI's strict mode); Anthropic takes the schemas as " +
        'they are',
    });
  }
  if (problems.length > 0) throw new RequestValidationError(problems);
  if (f === 'openai-responses') return strict === 'false' ? 'openai-responses' : 'openai-responses-strict';
  return f === 'openai' && strict === 'true' ? 'openai-strict' : (f as 'anthropic' | 'openai');
}
