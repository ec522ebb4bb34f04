import { ClassConstructor, plainToInstance } from 'class-transformer';
import { validateSync, ValidationError } from 'class-validator';
import { FieldProblem, RequestValidationError } from './request-validation.error';

/** One problem per field, its constraint messages joined. */
function collect(errors: ValidationError[], prefix = ''): FieldProblem[] {
  return errors.flatMap((e) => {
    const field = prefix ? `${prefix}.${e.property}` : e.property;
    const messages = Object.values(e.constraints ?? {}).map((message) =>
      message.startsWith('property ') && message.endsWith(' should not exist') ? 'unknown field' : message,
    );
    const own = messages.length > 0 ? [{ field, message: messages.join('; ') }] : [];
    return [...own, ...collect(e.children ?? [], field)];
  });
}

/**
 * The object without its `null` fields: `null` means absent, as OpenAI's strict tool schemas send it. A required
 * field sent as `null` is then reported missing; an optional one takes its default.
 */
function withoutNulls(value: object): object {
  return Object.fromEntries(Object.entries(value).filter(([, v]) => v !== null));
}

/**
 * Turns an untrusted JSON value into a validated DTO, or throws a 400 naming every field at fault.
 * Unknown fields are rejected, and no implicit type conversion happens: `"5"` is not a number. A field sent as
 * `null` counts as absent.
 */
export function validateDto<T extends object>(cls: ClassConstructor<T>, value: unknown, prefix = ''): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new RequestValidationError([{ field: prefix || 'body', message: 'must be a JSON object' }]);
  }
  const instance = plainToInstance(cls, withoutNulls(value), { enableImplicitConversion: false });
  const errors = validateSync(instance, {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    validationError: { target: false, value: false },
  });
  if (errors.length > 0) throw new RequestValidationError(collect(errors, prefix));
  return instance;
}
