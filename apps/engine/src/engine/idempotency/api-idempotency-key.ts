import { ApiHeader } from '@nestjs/swagger';
import { IDEMPOTENCY_KEY_PATTERN } from './idempotency.service';

/** Documents the optional `Idempotency-Key` header of an operation that creates something. */
export const ApiIdempotencyKey = (): MethodDecorator =>
  ApiHeader({
    name: 'Idempotency-Key',
    required: false,
    schema: { type: 'string', pattern: IDEMPOTENCY_KEY_PATTERN.source },
    description:
      '1–255 visible ASCII characters. The same key with the same request gets the stored answer again (for ' +
      'SWITCHYARD_IDEMPOTENCY_TTL_SECONDS, 24 h by default); with ' +
      'another request, 422',
  });
