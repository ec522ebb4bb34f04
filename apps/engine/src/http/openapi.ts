import type { INestApplication } from '@nestjs/common';
import { DocumentBuilder, SwaggerModule } from '@nestjs/swagger';
import type { SchemaObject } from '@nestjs/swagger/dist/interfaces/open-api-spec.interface';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';

/** `$ref` to a DTO's schema; the schemas come from the same class-validator metadata that validates requests. */
export const schemaRef = (cls: { name: string }): { $ref: string } => ({
  $ref: `#/components/schemas/${cls.name}`,
});

/** Serves the OpenAPI document at /docs (UI) and /docs-json. */
export function installOpenApi(app: INestApplication): void {
  const config = new DocumentBuilder()
    .setTitle('Switchyard')
    .setDescription('Sandbox-routing execution engine for AI agents')
    .setVersion('1')
    .addBearerAuth()
    .build();
  const document = SwaggerModule.createDocument(app, config);
  // class-validator-jsonschema types its output with openapi3-ts; the shapes are the same JSON Schema.
  const schemas = validationMetadatasToSchemas({ refPointerPrefix: '#/components/schemas/' }) as Record<
    string,
    SchemaObject
  >;
  document.components = { ...document.components, schemas: { ...document.components?.schemas, ...schemas } };
  SwaggerModule.setup('docs', app, document, { jsonDocumentUrl: 'docs-json' });
}
