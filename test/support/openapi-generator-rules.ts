/**
 * What outside client generators need of the OpenAPI document, as checks: each returns where the document breaks a
 * rule (a JSON pointer), empty when it keeps it. Used on the checked-in document
 * (apps/engine/src/edge/http/openapi-generators.spec.ts) and on the one an engine serves
 * (test/e2e/generated-clients.e2e-spec.ts).
 */

type Node = Record<string, unknown>;

const isObject = (value: unknown): value is Node =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Keys whose values are data, not schemas (an example may well hold a `title`). */
const DATA_KEYS = new Set(['example', 'examples', 'default', 'enum', 'info', 'servers', 'security']);

/** Calls `visit` on every object of the document that can be a schema, with its JSON pointer. */
function eachNode(document: unknown, visit: (node: Node, at: string) => void): void {
  const walk = (value: unknown, at: string): void => {
    if (Array.isArray(value)) {
      value.forEach((item, i) => walk(item, `${at}/${i}`));
      return;
    }
    if (!isObject(value)) return;
    visit(value, at);
    for (const [key, child] of Object.entries(value)) {
      if (!DATA_KEYS.has(key)) walk(child, `${at}/${key.replaceAll('~', '~0').replaceAll('/', '~1')}`);
    }
  };
  walk(document, '#');
}

/**
 * Objects whose keys the schema does not say: `type: object` with neither `properties` nor `additionalProperties`
 * (nor a composition saying it). openapi-typescript makes such an object `Record<string, never>`, into which no
 * value fits; `additionalProperties: true` (or the values' schema) says what it holds.
 */
export function freeFormObjectsWithoutAdditionalProperties(document: unknown): string[] {
  const found: string[] = [];
  eachNode(document, (node, at) => {
    if (node.type !== 'object') return;
    if ('properties' in node || 'additionalProperties' in node) return;
    if ('allOf' in node || 'anyOf' in node || 'oneOf' in node) return;
    found.push(at);
  });
  return found;
}

/**
 * Titles used by more than one schema, or that are a component's name too: openapi-python-client names a model
 * after its title, and of two models with one name it drops one (and every schema using it).
 */
export function collidingTitles(document: unknown): string[] {
  const components = isObject(document) && isObject(document.components) ? document.components : {};
  const names = new Set(Object.keys(isObject(components.schemas) ? components.schemas : {}));
  const byTitle = new Map<string, string[]>();
  eachNode(document, (node, at) => {
    if (typeof node.title !== 'string') return;
    byTitle.set(node.title, [...(byTitle.get(node.title) ?? []), at]);
  });
  const found: string[] = [];
  for (const [title, places] of byTitle) {
    if (places.length > 1) found.push(`title "${title}" at ${places.join(', ')}`);
    else if (names.has(title)) found.push(`title "${title}" at ${places[0]} is also a component's name`);
  }
  return found;
}

/** Whether a property's schema admits null (`nullable`, itself or in a branch of its composition). */
const admitsNull = (schema: unknown): boolean =>
  isObject(schema) &&
  (schema.nullable === true ||
    (['anyOf', 'oneOf'] as const).some((k) => Array.isArray(schema[k]) && schema[k].some(admitsNull)));

/**
 * Required properties that may be null. datamodel-code-generator, without `--strict-nullable`, reads `nullable` only
 * on optional properties: it types a required nullable one as never null, and the models it makes refuse real
 * answers. A nullable property is left out of `required`.
 */
export function requiredNullableProperties(document: unknown): string[] {
  const found: string[] = [];
  eachNode(document, (node, at) => {
    if (!Array.isArray(node.required) || !isObject(node.properties)) return;
    for (const name of node.required) {
      if (typeof name === 'string' && admitsNull(node.properties[name]))
        found.push(`${at}/properties/${name}`);
    }
  });
  return found;
}

/**
 * Request and response bodies that name a media type but give it no schema (`content: {"application/json": {}}`):
 * openapi-python-client cannot type them and leaves the operation out of the client. Raw bytes are
 * `{"type": "string", "format": "binary"}` under their media type (`application/octet-stream`, `application/x-tar`).
 */
export function mediaTypesWithoutSchema(document: unknown): string[] {
  const found: string[] = [];
  eachNode(document, (node, at) => {
    if (!isObject(node.content) || !/\/(requestBody|responses\/[^/]+)$/.test(at)) return;
    for (const [type, media] of Object.entries(node.content)) {
      if (!isObject(media) || !isObject(media.schema))
        found.push(`${at}/content/${type.replaceAll('/', '~1')}`);
    }
  });
  return found;
}
