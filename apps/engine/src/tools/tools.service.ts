import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import { toOpenAiStrictSchema } from './openai-strict-schema';
import { buildToolCatalog, type JsonSchema, type ToolDefinition } from './tool-catalog';
import { ToolDescriptions } from './tool-descriptions';
import type { ToolFormat } from './tool-list.query';

export type { ToolFormat } from './tool-list.query';

/** The engine's tool list, in the shape each model API takes as is. */
@Injectable()
export class ToolsService {
  private readonly catalog: ToolDefinition[] = buildToolCatalog();
  /** Strict schemas, derived once: the catalog does not change at run time (a bad one stops the engine at boot). */
  private readonly strict = new Map<string, JsonSchema>(
    this.catalog.map((t) => [t.name, toOpenAiStrictSchema(t.inputSchema)]),
  );
  private readonly descriptions: ToolDescriptions;

  constructor(@Inject(ENGINE_CONFIG) config: EngineConfig) {
    this.descriptions = new ToolDescriptions(config.tools.descriptionsFile);
  }

  find(name: string): ToolDefinition | undefined {
    return this.catalog.find((t) => t.name === name);
  }

  names(): string[] {
    return this.catalog.map((t) => t.name);
  }

  list(format: ToolFormat): unknown[] {
    const overrides = this.descriptions.read();
    return this.catalog.map((t) => {
      const description = overrides[t.name] ?? t.description;
      switch (format) {
        case 'anthropic':
          return { name: t.name, description, input_schema: t.inputSchema };
        case 'openai':
          return { type: 'function', function: { name: t.name, description, parameters: t.inputSchema } };
        case 'openai-strict':
          return {
            type: 'function',
            function: { name: t.name, description, parameters: this.strict.get(t.name), strict: true },
          };
      }
    });
  }
}
