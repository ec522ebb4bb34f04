import type { ClassConstructor } from 'class-transformer';
import type { TransformOperationExecutor as Executor } from 'class-transformer/types/TransformOperationExecutor';
import type { MetadataStorage } from 'class-transformer/types/MetadataStorage';

// class-transformer's executor and its decorator registry are not exported from its index (see openapi.ts).
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { TransformOperationExecutor } = require('class-transformer/cjs/TransformOperationExecutor') as {
  TransformOperationExecutor: typeof Executor;
};
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: MetadataStorage;
};

/** class-transformer's TransformationType.PLAIN_TO_CLASS (its enums are plain numbers). */
const PLAIN_TO_CLASS = 0;

type GetKeys = (target: unknown, object: Record<string, unknown>, isMap: boolean) => string[];

/**
 * Whether class-transformer's `getKeys` would answer exactly `Object.keys(object)` for `target`: no `@Expose`,
 * `@Exclude` or class strategy on it (the engine's DTOs use none; a plain object has no target at all).
 */
function keysAreOwnKeys(target: unknown): boolean {
  if (typeof target !== 'function') return target === undefined;
  return (
    defaultMetadataStorage.getStrategy(target) === 'none' &&
    defaultMetadataStorage.getExposedProperties(target, PLAIN_TO_CLASS).length === 0 &&
    defaultMetadataStorage.getExcludedProperties(target, PLAIN_TO_CLASS).length === 0
  );
}

/** JSON data with no class to become: a plain object or an array. */
const isFreeForm = (value: unknown): boolean =>
  Array.isArray(value) ||
  (typeof value === 'object' && value !== null && Object.getPrototypeOf(value) === Object.prototype);

type Transform = (
  source: unknown,
  value: unknown,
  targetType: unknown,
  arrayType: unknown,
  isMap: boolean,
  level?: number,
) => unknown;

/**
 * `plainToInstance(cls, plain)` (default options, no implicit conversion), in linear time and without per-value
 * overhead. class-transformer 0.5.1 de-duplicates each object's keys with `indexOf`, quadratic in the keys (an object
 * of 50 000 keys in a body held the event loop 3 s, 200 000 keys over a minute), and spends microseconds of metadata
 * lookups on each value of free-form data (`metadata`, `input`, `env`) only to copy it. So: free-form data (no class
 * to become) is kept as parsed (it is the request's own, parsed for it alone; copying 100 000 values took 25 ms),
 * and where its key list is provably the object's own keys (the options used here, a target without expose/exclude
 * metadata) they are taken as they are; anything else goes the library's way.
 */
export function toInstance<T extends object>(cls: ClassConstructor<T>, plain: object): T {
  const executor = new TransformOperationExecutor(PLAIN_TO_CLASS, {
    enableCircularCheck: false,
    enableImplicitConversion: false,
    excludeExtraneousValues: false,
    exposeDefaultValues: false,
    exposeUnsetFields: true,
    ignoreDecorators: false,
  });
  // Own properties shadow the prototype's methods, and the executor recurses through `this`.
  const own = executor as unknown as { getKeys: GetKeys; transform: Transform };
  const getKeys = own.getKeys.bind(executor);
  own.getKeys = (target, object, isMap) =>
    !isMap && !(object instanceof Map) && keysAreOwnKeys(target)
      ? Object.keys(object)
      : getKeys(target, object, isMap);
  const transform = own.transform.bind(executor);
  own.transform = (source, value, targetType, arrayType, isMap, level) =>
    source === undefined && targetType === undefined && !isMap && isFreeForm(value)
      ? value
      : transform(source, value, targetType, arrayType, isMap, level);
  return own.transform(undefined, plain, cls, undefined, false) as T;
}
