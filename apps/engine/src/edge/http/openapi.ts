import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type {
  OpenAPIObject,
  ReferenceObject,
  SchemaObject,
} from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import type { MetadataStorage as TransformerMetadata } from 'class-transformer/types/MetadataStorage';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import { ERROR_HEADER_COMPONENTS, ERROR_RESPONSE, ERROR_RESPONSE_SCHEMA } from './api-responses';
import { TemplateRegistry } from '../../session/templates/template-registry';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import { describeRequestSchemas, type EngineLimits } from './request-schemas';
import { RESPONSE_SCHEMAS } from './response-schemas';

// class-transformer ships its `@Type()` registry untyped. Without it, an array of nested DTOs (`@ValidateNested({
// each: true }) @Type(() => PlanStepDto)`) would point at a schema named `Array` that does not exist.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const { defaultMetadataStorage } = require('class-transformer/cjs/storage') as {
  defaultMetadataStorage: TransformerMetadata;
};

const SCHEMAS = '#/components/schemas/';

/** `$ref` to a DTO's schema; the schemas come from the same class-validator metadata that validates requests. */
export const schemaRef = (cls: { name: string }): { $ref: string } => ({
  $ref: `${SCHEMAS}${cls.name}`,
});

/** Names of the schemas `node` points at with `$ref`, anywhere inside it. */
function schemaRefsIn(node: unknown, found: string[] = []): string[] {
  if (Array.isArray(node)) {
    for (const item of node) schemaRefsIn(item, found);
  } else if (node !== null && typeof node === 'object') {
    for (const [key, value] of Object.entries(node)) {
      if (key === '$ref' && typeof value === 'string' && value.startsWith(SCHEMAS)) {
        found.push(value.slice(SCHEMAS.length));
      } else {
        schemaRefsIn(value, found);
      }
    }
  }
  return found;
}

/**
 * The schemas the operations use, directly or through other schemas. class-validator-jsonschema converts every
 * class with validation metadata in the process, the engine's own env schema included: that is internal and
 * stays out of the public document.
 */
function usedSchemas(
  document: OpenAPIObject,
  available: Record<string, SchemaObject | ReferenceObject>,
): Record<string, SchemaObject | ReferenceObject> {
  const used = new Set<string>();
  const pending = schemaRefsIn({ ...document, components: { ...document.components, schemas: {} } });
  for (let name = pending.pop(); name !== undefined; name = pending.pop()) {
    if (used.has(name) || !(name in available)) continue;
    used.add(name);
    schemaRefsIn(available[name], pending);
  }
  return Object.fromEntries(Object.entries(available).filter(([name]) => used.has(name)));
}

/**
 * The OpenAPI document of the app's routes. Needs no listening server: `npm run client:generate` builds it from an
 * app that never listens, and serving it (`installOpenApi`) uses the same function, so the two cannot differ.
 */
export function buildOpenApiDocument(app: INestApplication): OpenAPIObject {
  const config = new DocumentBuilder()
    .setTitle('Switchyard')
    .setDescription('Sandbox-routing execution engine for AI agents')
    .setVersion('1')
    // The keys of SWITCHYARD_API_KEYS are opaque strings, not JWTs (Nest's default `bearerFormat`).
    .addBearerAuth({
      type: 'http',
      scheme: 'bearer',
      bearerFormat: undefined,
      description: 'An API key from SWITCHYARD_API_KEYS (opaque); not needed when the engine has no keys',
    })
    // Relative: the engine that serves this document.
    .addServer('/', 'The engine serving this document')
    .build();
  const document = SwaggerModule.createDocument(app, config);
  // class-validator-jsonschema types its output with openapi3-ts; the shapes are the same JSON Schema.
  const converted = validationMetadatasToSchemas({
    refPointerPrefix: SCHEMAS,
    classTransformerMetadataStorage: defaultMetadataStorage,
  }) as Record<string, SchemaObject>;
  const registry = app.get(TemplateRegistry);
  const engine = app.get<EngineConfig>(ENGINE_CONFIG);
  const limits: EngineLimits = {
    templates: registry.names().filter((name) => registry.entry(name)?.definition !== undefined),
    maxTtlSeconds: engine.sessions.maxTtlSeconds,
    noEgress: engine.network.bound.isEmpty,
    maxTimeoutMs: engine.sandbox.maxTimeoutMs,
  };
  const schemas = usedSchemas(document, {
    ...document.components?.schemas,
    ...describeRequestSchemas(converted, limits),
    ...RESPONSE_SCHEMAS,
    [ERROR_RESPONSE]: ERROR_RESPONSE_SCHEMA,
  });
  document.components = {
    ...document.components,
    schemas,
    headers: { ...document.components?.headers, ...ERROR_HEADER_COMPONENTS },
  };
  if (engine.state.store === 'postgres') documentReplicaErrors(document);
  return document;
}

/** Paths whose requests a replica may forward to the replica serving the session (`replicas/session-forwarding.ts`). */
const FORWARDED = /^\/v1\/sessions\/\{sessionId\}|^\/v1\/tools$|^\/mcp$/;

/**
 * With replicas, a forwarded request can also answer 503 (the serving replica is being taken over: retry after
 * `Retry-After`) and 502 (it failed while handling the request); `GET /v1/approvals` asks every replica (503 when
 * they cannot be listed). Added to the operations that can answer them, where not documented already.
 */
function documentReplicaErrors(document: OpenAPIObject): void {
  const error = (description: string) => ({
    description,
    content: { 'application/json': { schema: { $ref: `${SCHEMAS}${ERROR_RESPONSE}` } } },
  });
  for (const [route, item] of Object.entries(document.paths)) {
    const forwarded = FORWARDED.test(route);
    if (!forwarded && route !== '/v1/approvals') continue;
    for (const method of ['get', 'post', 'put', 'delete', 'patch'] as const) {
      const operation = item[method];
      if (!operation) continue;
      operation.responses['503'] ??= error(
        'Replicas: the replica serving the session is changing or being taken over (`REPLICA_UNAVAILABLE`, ' +
          '`REPLICA_MOVED`), or the shared state cannot be read: retry after `Retry-After` seconds',
      );
      if (forwarded) {
        operation.responses['502'] ??= error(
          'Replicas: the replica serving the session failed while handling the request (`REPLICA_FAILED`); an ' +
            'action it started ends `interrupted`: retry with the same Idempotency-Key',
        );
      }
    }
  }
}

/** Serves the OpenAPI document at /docs (UI) and /docs-json; returns it. */
export function installOpenApi(app: INestApplication): OpenAPIObject {
  const document = buildOpenApiDocument(app);
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs-json' });
  return document;
}
