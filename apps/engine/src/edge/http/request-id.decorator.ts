import { createParamDecorator, type ExecutionContext } from '@nestjs/common';

/** The id `EngineLogger`'s middleware gave the request (the caller's `X-Request-Id` when sane), for results and log lines. */
export const RequestId = createParamDecorator((_: unknown, ctx: ExecutionContext): string | undefined => {
  const id = ctx.switchToHttp().getRequest<{ id?: unknown }>().id;
  return typeof id === 'string' ? id : undefined;
});
