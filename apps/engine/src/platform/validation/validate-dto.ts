import type { ClassConstructor } from 'class-transformer';
import { getMetadataStorage, validateSync, ValidationError } from 'class-validator';
import { oversizeProblems } from './dto-bounds';
import { toInstance } from './dto-transform';
import { forbiddenKeyMessage, isForbiddenKey } from './json-input';
import { FieldProblem, RequestValidationError } from './request-validation.error';

/**
 * One problem per field, its constraint messages joined. An array element is named with brackets (`steps[1].retry`),
 * as the rest of the API names it.
 */
function collect(errors: ValidationError[], prefix = ''): FieldProblem[] {
  return errors.flatMap((e) => {
    const field = !prefix
      ? e.property
      : /^\d+$/.test(e.property)
        ? `${prefix}[${e.property}]`
        : `${prefix}.${e.property}`;
    const messages = Object.values(e.constraints ?? {}).map((message) =>
      message.startsWith('property ') && message.endsWith(' should not exist') ? 'unknown field' : message,
    );
    const own = messages.length > 0 ? [{ field, message: messages.join('; ') }] : [];
    return [...own, ...collect(e.children ?? [], field)];
  });
}

/** The fields `cls` declares (those with a validation rule): any other is unknown, even sent as `null`. */
function declaredFields(cls: ClassConstructor<object>): Set<string> {
  return new Set(
    getMetadataStorage()
      .getTargetValidationMetadatas(cls, '', true, false)
      .map((m) => m.propertyName),
  );
}

/**
 * The object without the `null` of its declared fields: `null` means absent, as OpenAI's strict tool schemas send
 * it. A required field sent as `null` is then reported missing; an optional one takes its default. A `null` under a
 * name the DTO does not have stays, and is refused as unknown like any other value there (as the document's
 * `additionalProperties: false` says).
 */
function withoutNulls(value: object, declared: Set<string>): object {
  return Object.fromEntries(Object.entries(value).filter(([k, v]) => v !== null || !declared.has(k)));
}

/**
 * Turns an untrusted JSON value into a validated DTO, or throws a 400 naming every field at fault.
 * Unknown fields are rejected, and no implicit type conversion happens: `"5"` is not a number. A field sent as
 * `null` counts as absent. `__proto__`, `constructor` and `prototype` are refused as fields (as anywhere in a body).
 */
export function validateDto<T extends object>(cls: ClassConstructor<T>, value: unknown, prefix = ''): T {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new RequestValidationError([{ field: prefix || 'body', message: 'must be a JSON object' }]);
  }
  // Bodies were checked whole when parsed; query objects were not, and class-transformer skips these keys silently.
  const forbidden = Object.keys(value).filter(isForbiddenKey);
  if (forbidden.length > 0) {
    throw new RequestValidationError(
      forbidden.map((key) => ({
        field: prefix ? `${prefix}.${key}` : key,
        message: forbiddenKeyMessage(key),
      })),
    );
  }
  const oversize = oversizeProblems(cls, value, prefix);
  if (oversize.length > 0) throw new RequestValidationError(oversize);
  // class-transformer's own plainToInstance is quadratic in the keys of each object (see dto-transform.ts).
  const instance = toInstance(cls, withoutNulls(value, declaredFields(cls)));
  const errors = validateSync(instance, {
    whitelist: true,
    forbidNonWhitelisted: true,
    forbidUnknownValues: true,
    validationError: { target: false, value: false },
  });
  if (errors.length > 0) throw new RequestValidationError(collect(errors, prefix));
  return instance;
}
