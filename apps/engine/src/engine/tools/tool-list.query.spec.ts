import { RequestValidationError } from '../../platform/validation/request-validation.error';
import { parseToolListQuery } from './tool-list.query';

const problems = (format: unknown, strict: unknown): { field: string; message: string }[] => {
  try {
    parseToolListQuery(format, strict);
  } catch (e) {
    if (e instanceof RequestValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a validation error');
};

describe('parseToolListQuery', () => {
  it('reads format (default anthropic) and strict (default false)', () => {
    expect(parseToolListQuery(undefined, undefined)).toBe('anthropic');
    expect(parseToolListQuery('anthropic', 'false')).toBe('anthropic');
    expect(parseToolListQuery('openai', undefined)).toBe('openai');
    expect(parseToolListQuery('openai', 'false')).toBe('openai');
    expect(parseToolListQuery('openai', 'true')).toBe('openai-strict');
  });

  it('makes the Responses API list strict unless strict=false, as the Responses API takes a function', () => {
    expect(parseToolListQuery('openai-responses', undefined)).toBe('openai-responses-strict');
    expect(parseToolListQuery('openai-responses', 'true')).toBe('openai-responses-strict');
    expect(parseToolListQuery('openai-responses', 'false')).toBe('openai-responses');
  });

  it('accepts only true or false for strict, naming it', () => {
    for (const strict of ['', 'yes', '1', 'TRUE', ['true', 'true'], { a: 'b' }]) {
      expect(problems('openai', strict)).toEqual([{ field: 'strict', message: 'must be true or false' }]);
    }
  });

  it("refuses strict=true without an OpenAI format: strict mode is OpenAI's", () => {
    for (const format of [undefined, 'anthropic']) {
      const [p, ...rest] = problems(format, 'true');
      expect(rest).toEqual([]);
      expect(p.field).toBe('strict');
      expect(p.message).toContain('format=openai or openai-responses');
    }
  });

  it('names every bad query field at once', () => {
    expect(problems('xml', 'maybe').map((p) => p.field)).toEqual(['format', 'strict']);
    expect(problems('xml', 'true').map((p) => p.field)).toEqual(['format', 'strict']);
    expect(problems('openai_responses', undefined).map((p) => p.field)).toEqual(['format']);
    expect(problems(['openai', 'anthropic'], undefined)).toEqual([
      { field: 'format', message: 'must be anthropic, openai or openai-responses' },
    ]);
  });
});
