import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_CONFIG } from '../config/config.tokens';
import type { EngineConfig } from '../config/engine-config';
import { buildToolCatalog, type ToolDefinition } from './tool-catalog';
import { ToolDescriptions } from './tool-descriptions';

export type ToolFormat = 'anthropic' | 'openai';

/** The engine's tool list, in the shape each model API takes as is. */
@Injectable()
export class ToolsService {
  private readonly catalog: ToolDefinition[] = buildToolCatalog();
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
      return format === 'anthropic'
        ? { name: t.name, description, input_schema: t.inputSchema }
        : { type: 'function', function: { name: t.name, description, parameters: t.inputSchema } };
    });
  }
}
