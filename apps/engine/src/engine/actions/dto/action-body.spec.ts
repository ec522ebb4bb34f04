import { RequestValidationError } from '../../../platform/validation/request-validation.error';
import { parseActionBody } from './action-body';

const problems = (body: unknown): { field: string; message: string }[] => {
  try {
    parseActionBody(body);
  } catch (e) {
    if (e instanceof RequestValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a validation error');
};

describe('parseActionBody', () => {
  it('accepts each action type', () => {
    expect(
      parseActionBody({ type: 'code', language: 'bash', code: 'echo hi', tier: 'container' }),
    ).toMatchObject({
      type: 'code',
      tier: 'container',
    });
    expect(parseActionBody({ type: 'file', op: 'move', path: 'a', to: 'b' })).toMatchObject({
      op: 'move',
      to: 'b',
    });
    expect(parseActionBody({ type: 'browser', op: 'navigate', url: 'https://example.org' })).toMatchObject({
      op: 'navigate',
    });
  });

  it('names the discriminator at fault', () => {
    expect(problems({ type: 'sql' })).toEqual([
      { field: 'type', message: 'must be one of code, file, browser, process, kernel, skill' },
    ]);
    expect(problems({ type: 'file', op: 'chmod' })[0].field).toBe('op');
    // A terminal opens through its own API, with its WebSocket: never as a bare action.
    expect(problems({ type: 'terminal', op: 'open' })).toEqual([
      { field: 'type', message: expect.stringContaining('/v1/sessions/{sessionId}/terminals') },
    ]);
    expect(problems('code')[0].field).toBe('body');
  });

  it('lists every bad field, unknown fields included, without coercing types', () => {
    const p = problems({ type: 'code', language: 'python', code: 1, timeoutMs: '5', extra: true });
    expect(p.map((x) => x.field).sort()).toEqual(['code', 'extra', 'timeoutMs']);
    expect(p.find((x) => x.field === 'extra')?.message).toBe('unknown field');
  });

  it('rejects fields that belong to another op', () => {
    expect(problems({ type: 'file', op: 'read', path: 'a', content: 'x' }).map((x) => x.field)).toEqual([
      'content',
    ]);
  });
});
