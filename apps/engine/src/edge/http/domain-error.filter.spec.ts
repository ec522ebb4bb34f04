import { ArgumentsHost, NotFoundException, UnauthorizedException } from '@nestjs/common';
import { InvalidInputError, NotFoundError, SwitchyardError } from '@switchyard/common';
import { DomainErrorFilter } from './domain-error.filter';
import { RequestValidationError } from '../../platform/validation/request-validation.error';

class QueueFull extends SwitchyardError {
  readonly code = 'QUEUE_FULL';
  readonly kind = 'rate_limited' as const;
}

/** What the filter writes for `exception`: status, headers and body. */
function answer(exception: unknown): { status: number; headers: Record<string, string>; body: unknown } {
  const out = { status: 0, headers: {} as Record<string, string>, body: undefined as unknown };
  const res = {
    headersSent: false,
    setHeader: (name: string, value: string) => (out.headers[name] = value),
    status(code: number) {
      out.status = code;
      return this;
    },
    json(body: unknown) {
      out.body = body;
      return this;
    },
  };
  const host = { switchToHttp: () => ({ getResponse: () => res }) } as unknown as ArgumentsHost;
  new DomainErrorFilter().catch(exception, host);
  return out;
}

describe('DomainErrorFilter: one error envelope for every answer', () => {
  it('answers a domain error by its kind, its `field` as the one field at fault', () => {
    expect(answer(new InvalidInputError('env.LD_PRELOAD', 'is not allowed', 'ENV_DENIED'))).toEqual({
      status: 400,
      headers: {},
      body: {
        error: {
          code: 'ENV_DENIED',
          message: 'is not allowed',
          fields: [{ path: 'env.LD_PRELOAD', message: 'is not allowed' }],
        },
      },
    });
    expect(answer(new NotFoundError('no session ses_1'))).toMatchObject({
      status: 404,
      body: { error: { code: 'NOT_FOUND', message: 'no session ses_1' } },
    });
  });

  it('keeps structured details, and turns retryAfterSeconds into Retry-After', () => {
    expect(answer(new QueueFull('queue full', { retryAfterSeconds: 0.2, limit: 4 }))).toEqual({
      status: 429,
      headers: { 'Retry-After': '1' },
      body: {
        error: { code: 'QUEUE_FULL', message: 'queue full', details: { retryAfterSeconds: 0.2, limit: 4 } },
      },
    });
  });

  it('lists every field of a failed validation', () => {
    const body = answer(
      new RequestValidationError([
        { field: 'language', message: 'must be one of python, node, bash' },
        { field: 'code', message: 'must be a string' },
      ]),
    );
    expect(body).toMatchObject({
      status: 400,
      body: {
        error: {
          code: 'VALIDATION_FAILED',
          fields: [
            { path: 'language', message: 'must be one of python, node, bash' },
            { path: 'code', message: 'must be a string' },
          ],
        },
      },
    });
  });

  it('answers Nest’s own exceptions in the same envelope, a code from the status when they have none', () => {
    expect(answer(new NotFoundException('Cannot GET /nowhere')).body).toEqual({
      error: { code: 'NOT_FOUND', message: 'Cannot GET /nowhere' },
    });
    expect(
      answer(new UnauthorizedException({ message: 'missing bearer token', code: 'UNAUTHENTICATED' })).body,
    ).toEqual({ error: { code: 'UNAUTHENTICATED', message: 'missing bearer token' } });
  });

  it('answers anything else as a bare 500 that leaks nothing', () => {
    const logged = jest.spyOn(console, 'error').mockImplementation(() => undefined);
    try {
      expect(answer(new TypeError('secret internals at /srv/x'))).toEqual({
        status: 500,
        headers: {},
        body: { error: { code: 'INTERNAL', message: 'internal error' } },
      });
    } finally {
      logged.mockRestore();
    }
  });
});
