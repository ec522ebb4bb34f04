import Ajv from 'ajv';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { strictModeViolations } from '../../../../../test/support/openai-strict-rules';
import type { EngineConfig } from '../../platform/config/engine-config';
import type { ToolFormat } from './tool-list.query';
import { policyServiceForTests } from '../../gates/policies/policy.testing';
import { skillsForTests } from '../skills/skill-registry.testing';
import { ToolsService } from './tools.service';

/**
 * Golden lists: the catalog in each format, checked in. A change to a tool's schema or description shows up as a
 * diff of these files; regenerate them deliberately with
 * `UPDATE_GOLDEN=1 npx jest apps/engine/src/engine/tools/tools.service.spec.ts && npx prettier --write apps/engine/src/engine/tools/golden`.
 */
const GOLDEN_DIR = path.join(__dirname, 'golden');
const golden = (format: ToolFormat): string => path.join(GOLDEN_DIR, `tools.${format}.json`);

const service = (descriptionsFile?: string): ToolsService =>
  new ToolsService(
    { tools: { descriptionsFile }, sandbox: { maxTimeoutMs: 300_000 } } as unknown as EngineConfig,
    policyServiceForTests(),
    skillsForTests(),
  );

interface OpenAiTool {
  type: string;
  function: { name: string; description: string; parameters: any; strict?: boolean };
}

describe('ToolsService.list', () => {
  const tools = service();

  it.each<ToolFormat>(['anthropic', 'openai', 'openai-strict'])(
    'writes the %s list as checked in',
    (format) => {
      const list = { tools: tools.list(format) };
      if (process.env.UPDATE_GOLDEN === '1') writeFileSync(golden(format), JSON.stringify(list, null, 2));
      // Compared as JSON text: values and key order, whatever the file's line breaks.
      expect(JSON.stringify(list, null, 1)).toBe(
        JSON.stringify(JSON.parse(readFileSync(golden(format), 'utf8')), null, 1),
      );
    },
  );

  it('keeps every strict-mode rule in every strict schema, at every level', () => {
    const list = tools.list('openai-strict') as OpenAiTool[];
    expect(list.length).toBe(tools.names().length);
    for (const t of list) {
      expect(t.type).toBe('function');
      expect(t.function.strict).toBe(true);
      expect({ tool: t.function.name, violations: strictModeViolations(t.function.parameters) }).toEqual({
        tool: t.function.name,
        violations: [],
      });
    }
  });

  it('writes the Responses API lists as the Chat Completions ones, flat, always saying strict', () => {
    // The Responses API reads a function without `strict` as strict: its list is strict unless asked otherwise.
    const flat = (list: unknown[], strict?: boolean) =>
      (list as OpenAiTool[]).map((t) => ({
        type: t.type,
        ...t.function,
        ...(strict !== undefined && { strict }),
      }));
    expect(tools.list('openai-responses-strict')).toEqual(flat(tools.list('openai-strict')));
    expect(tools.list('openai-responses')).toEqual(flat(tools.list('openai'), false));
    for (const t of tools.list('openai-responses-strict') as Array<Record<string, unknown>>) {
      expect(Object.keys(t)).toEqual(['type', 'name', 'description', 'parameters', 'strict']);
      expect(t.strict).toBe(true);
    }
  });

  it('finds the breaks of the plain (non-strict) schemas, so the rule check above is not vacuous', () => {
    const bash = (tools.list('openai') as OpenAiTool[]).find((t) => t.function.name === 'bash')!;
    expect(strictModeViolations(bash.function.parameters)).toEqual([
      'parameters.timeoutMs: not in required',
      'parameters.timeoutMs: keyword minimum is not supported in strict mode',
      'parameters.timeoutMs: keyword maximum is not supported in strict mode',
      'parameters.state: not in required',
    ]);
    const start = (tools.list('openai') as OpenAiTool[]).find((t) => t.function.name === 'process_start')!;
    expect(strictModeViolations(start.function.parameters)).toEqual(
      expect.arrayContaining([
        'parameters.command: keyword maxLength is not supported in strict mode',
        'parameters.name: keyword pattern is not supported in strict mode',
        'parameters.env: additionalProperties must be false',
      ]),
    );
  });

  it('lists the same tools, descriptions and fields strict or not; only the optional ones become nullable', () => {
    const plain = tools.list('openai') as OpenAiTool[];
    const strict = tools.list('openai-strict') as OpenAiTool[];
    expect(strict.map((t) => t.function.name)).toEqual(plain.map((t) => t.function.name));
    plain.forEach((p, i) => {
      const s = strict[i].function;
      expect(s.description).toBe(p.function.description);
      expect(Object.keys(s.parameters.properties)).toEqual(Object.keys(p.function.parameters.properties));
      expect(p.function.strict).toBeUndefined();
      for (const [name, prop] of Object.entries<any>(s.parameters.properties)) {
        const optional = !p.function.parameters.required.includes(name);
        const acceptsNull = prop.anyOf?.some((b: any) => b.type === 'null') || prop.type?.includes?.('null');
        expect({ tool: s.name, field: name, nullable: Boolean(acceptsNull) }).toEqual({
          tool: s.name,
          field: name,
          nullable: optional,
        });
      }
    });
  });

  it('moves constraints strict mode refuses into the description, which keeps the original text first', () => {
    const find = (list: unknown[], name: string): OpenAiTool['function'] =>
      (list as OpenAiTool[]).find((t) => t.function.name === name)!.function;
    const plain = find(tools.list('openai'), 'process_start').parameters.properties;
    const strict = find(tools.list('openai-strict'), 'process_start').parameters.properties;
    expect(plain.command).toMatchObject({ minLength: 1, maxLength: 65536 });
    expect(strict.command).toEqual({
      type: 'string',
      description: `${plain.command.description} 1 to 65536 characters.`,
    });
    expect(strict.name.description).toBe(
      `${plain.name.description} Must match the regular expression ${plain.name.pattern}`,
    );
    // A free-form map cannot be a strict object: it is a list of {name, value} pairs.
    expect(strict.env.anyOf[0]).toMatchObject({
      type: 'array',
      items: { type: 'object', required: ['name', 'value'], additionalProperties: false },
    });
  });

  it('accepts, in each strict schema, every field with optional ones null; the plain schema does not', () => {
    const ajv = new Ajv({ strict: false });
    const plain = tools.list('openai') as OpenAiTool[];
    (tools.list('openai-strict') as OpenAiTool[]).forEach((t, i) => {
      const params = t.function.parameters;
      const optional = Object.keys(params.properties).filter(
        (k) => !plain[i].function.parameters.required.includes(k),
      );
      if (optional.length === 0) return;
      const nulls = Object.fromEntries(optional.map((k) => [k, null]));
      const validate = ajv.compile(params);
      const required = Object.fromEntries(
        Object.entries<any>(params.properties)
          .filter(([k]) => !optional.includes(k))
          .map(([k, p]) => [
            k,
            p.type === 'array' ? ['x'] : p.enum ? p.enum[0] : p.type === 'integer' ? 1 : 'x',
          ]),
      );
      expect({ tool: t.function.name, valid: validate({ ...required, ...nulls }) }).toEqual({
        tool: t.function.name,
        valid: true,
      });
      expect(ajv.validate(plain[i].function.parameters, { ...required, ...nulls })).toBe(false);
    });
  });

  it('applies description overrides from the TOML file to the strict list too', () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'switchyard-tools-'));
    try {
      const file = path.join(dir, 'tools.toml');
      writeFileSync(file, '[bash]\ndescription = "Shell for the build agent."\n');
      const bash = (service(file).list('openai-strict') as OpenAiTool[]).find(
        (t) => t.function.name === 'bash',
      );
      expect(bash?.function.description).toBe('Shell for the build agent.');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
