import { Inject, Injectable } from '@nestjs/common';
import { ENGINE_CONFIG } from '../../platform/config/config.tokens';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { HiddenTool } from '../../gates/policies/policy-evaluator';
import { PolicyService } from '../../gates/policies/policy.service';
import { SkillRegistry } from '../skills/skill-registry';
import { skillTool } from './skill-tool';
import type { PolicyFacts } from '../../state/policies/policy.types';
import type { Session } from '../../state/sessions/session.model';
import { toOpenAiStrictSchema } from './openai-strict-schema';
import { buildToolCatalog, type JsonSchema, type ToolDefinition } from './tool-catalog';
import { ToolDescriptions } from './tool-descriptions';
import type { ToolFormat } from './tool-list.query';

export type { ToolFormat } from './tool-list.query';

/** Whose tool list: a tenant's (engine and tenant policies), or one of its sessions' (its own policy too). */
export interface ToolScope {
  tenant: string;
  session?: Session;
}

/** What policies can tell of a tool before it is called: its name, type, op and language. */
function toolFacts(t: ToolDefinition): PolicyFacts {
  const action = t.toAction({});
  const language = t.language ?? action.language;
  return {
    tool: t.name,
    type: t.kind,
    ...(typeof action.op === 'string' && { op: action.op }),
    ...(typeof language === 'string' && { language }),
    hosts: [],
  };
}

/** The engine's tool list, in the shape each model API takes as is. */
/**
 * The catalog with what this engine's settings allow stated in it, as its OpenAPI document states them: a code tool's
 * `timeoutMs` is refused above SWITCHYARD_MAX_TIMEOUT_MS (not capped), so its schema says that maximum.
 */
function withEngineLimits(catalog: ToolDefinition[], maxTimeoutMs: number): ToolDefinition[] {
  return catalog.map((t) => {
    const timeout =
      t.kind === 'code' ? (t.inputSchema.properties.timeoutMs as JsonSchema | undefined) : undefined;
    if (!timeout) return t;
    const properties = {
      ...t.inputSchema.properties,
      timeoutMs: {
        ...timeout,
        maximum: maxTimeoutMs,
        description: `Wall-clock limit in milliseconds (default 30000, at most ${maxTimeoutMs}: SWITCHYARD_MAX_TIMEOUT_MS).`,
      },
    };
    return { ...t, inputSchema: { ...t.inputSchema, properties } };
  });
}

@Injectable()
export class ToolsService {
  private readonly catalog: ToolDefinition[];
  /** Strict schemas, derived once: the catalog does not change at run time (a bad one stops the engine at boot). */
  private readonly strict: Map<string, JsonSchema>;
  private readonly descriptions: ToolDescriptions;
  private readonly facts: Map<string, PolicyFacts>;

  constructor(
    @Inject(ENGINE_CONFIG) config: EngineConfig,
    private readonly policies: PolicyService,
    private readonly skills: SkillRegistry,
  ) {
    this.catalog = withEngineLimits(buildToolCatalog(), config.sandbox.maxTimeoutMs);
    this.strict = new Map(this.catalog.map((t) => [t.name, toOpenAiStrictSchema(t.inputSchema)]));
    this.facts = new Map(this.catalog.map((t) => [t.name, toolFacts(t)]));
    this.descriptions = new ToolDescriptions(config.tools.descriptionsFile);
  }

  /** A built-in tool, or (with a tenant) one of the skills it may call. */
  find(name: string, tenant?: string): ToolDefinition | undefined {
    const builtIn = this.catalog.find((t) => t.name === name);
    if (builtIn || tenant === undefined) return builtIn;
    const skill = this.skills.find(tenant, name);
    return skill && skillTool(skill);
  }

  /** Every tool's name: the built-in ones, then (with a tenant) its skills'. */
  names(tenant?: string): string[] {
    return this.toolsFor(tenant).map((t) => t.name);
  }

  /** The tools a policy leaves out of the scope's list, by name. */
  hidden(scope: ToolScope): Set<string> {
    return new Set(this.policyView(scope).hidden.map((h) => h.tool));
  }

  /** Which tools the scope's policy offers, and which it leaves out and why. */
  policyView(scope: ToolScope): { offered: string[]; hidden: HiddenTool[] } {
    const tools = this.toolsFor(scope.tenant);
    const facts = tools.map((t) => this.facts.get(t.name) ?? toolFacts(t));
    const hidden = this.policies.hidden(scope.tenant, facts, scope.session);
    const names = new Set(hidden.map((h) => h.tool));
    return { offered: tools.map((t) => t.name).filter((n) => !names.has(n)), hidden };
  }

  /** The tools in `format`: all the built-in ones, or those the scope's policy offers with the scope's skills. */
  list(format: ToolFormat, scope?: ToolScope): unknown[] {
    const overrides = this.descriptions.read();
    const hidden = scope ? this.hidden(scope) : new Set<string>();
    return this.toolsFor(scope?.tenant)
      .filter((t) => !hidden.has(t.name))
      .map((t) => {
        const description = overrides[t.name] ?? t.description;
        switch (format) {
          case 'anthropic':
            return { name: t.name, description, input_schema: t.inputSchema };
          case 'openai':
            return { type: 'function', function: { name: t.name, description, parameters: t.inputSchema } };
          case 'openai-strict': {
            const strict = this.strictSchema(t);
            return {
              type: 'function',
              function: {
                name: t.name,
                description,
                parameters: strict ?? t.inputSchema,
                strict: strict !== undefined,
              },
            };
          }
          // The Responses API's flat function tool. It reads a missing `strict` as true, so `strict` is always said.
          case 'openai-responses':
            return { type: 'function', name: t.name, description, parameters: t.inputSchema, strict: false };
          case 'openai-responses-strict': {
            const strict = this.strictSchema(t);
            return {
              type: 'function',
              name: t.name,
              description,
              parameters: strict ?? t.inputSchema,
              strict: strict !== undefined,
            };
          }
        }
      });
  }

  private toolsFor(tenant: string | undefined): ToolDefinition[] {
    return tenant === undefined
      ? this.catalog
      : [...this.catalog, ...this.skills.list(tenant).map(skillTool)];
  }

  /**
   * A tool's schema in OpenAI's strict form: the built-in ones' were derived at boot; a skill's is its author's, which
   * strict mode may not be able to say (then the skill is offered with `strict: false`).
   */
  private strictSchema(t: ToolDefinition): JsonSchema | undefined {
    const builtIn = this.strict.get(t.name);
    if (builtIn && t.kind !== 'skill') return builtIn;
    try {
      // A skill's objects are open unless its schema closes them: strict only where every one is closed.
      return toOpenAiStrictSchema(t.inputSchema, { declaredOnly: t.kind === 'skill' });
    } catch {
      return undefined;
    }
  }
}
