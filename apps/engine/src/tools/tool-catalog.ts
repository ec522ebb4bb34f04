import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import { BROWSER_ACTION_DTOS } from '../actions/dto/browser-action.dto';
import { CodeActionDto } from '../actions/dto/code-action.dto';
import { FILE_ACTION_DTOS } from '../actions/dto/file-action.dto';

/** JSON Schema of a tool's input. */
export interface JsonSchema {
  type: 'object';
  properties: Record<string, unknown>;
  required: string[];
  additionalProperties: false;
}

/** A tool a model can call: its input schema comes from the REST API's own validation classes. */
export interface ToolDefinition {
  name: string;
  description: string;
  inputSchema: JsonSchema;
  /** The REST action body for a tool input (not yet validated). */
  toAction(input: Record<string, unknown>): Record<string, unknown>;
  /** Action field → tool input field, for error messages a model can act on. */
  fieldOf(actionField: string): string;
  /** Fields the tool takes. */
  fields: string[];
  kind: 'code' | 'file' | 'browser';
}

type SchemaObject = { properties?: Record<string, unknown>; required?: string[]; description?: string };

let schemas: Record<string, SchemaObject> | undefined;
/** Schemas of every validation class, computed once (the metadata does not change at run time). */
export function dtoSchema(cls: { name: string }): SchemaObject {
  schemas ??= validationMetadatasToSchemas({ refPointerPrefix: '#/components/schemas/' }) as Record<
    string,
    SchemaObject
  >;
  const schema = schemas[cls.name];
  if (!schema) throw new Error(`no JSON schema for ${cls.name}`);
  return schema;
}

/** The schema of `cls` restricted to `pick` fields, renamed through `rename`. */
function derive(
  cls: { name: string },
  pick: string[],
  rename: Record<string, string> = {},
  describe: Record<string, string> = {},
): JsonSchema {
  const source = dtoSchema(cls);
  const properties: Record<string, unknown> = {};
  const required: string[] = [];
  for (const field of pick) {
    const prop = source.properties?.[field];
    if (prop === undefined) throw new Error(`${cls.name} has no field ${field}`);
    const name = rename[field] ?? field;
    properties[name] = describe[name] ? { ...(prop as object), description: describe[name] } : prop;
    if (source.required?.includes(field)) required.push(name);
  }
  return { type: 'object', properties, required, additionalProperties: false };
}

function codeTool(language: 'bash' | 'python' | 'node', description: string): ToolDefinition {
  const sourceField = language === 'bash' ? 'command' : 'code';
  const inputSchema = derive(
    CodeActionDto,
    ['code', 'timeoutMs'],
    { code: sourceField },
    {
      [sourceField]:
        language === 'bash'
          ? 'The bash command(s) to run in the session workspace.'
          : `The ${language} program to run in the session workspace.`,
    },
  );
  return {
    name: language,
    description,
    inputSchema,
    kind: 'code',
    fields: Object.keys(inputSchema.properties),
    toAction: (input) => {
      const { [sourceField]: code, ...rest } = input;
      return { ...rest, type: 'code', language, code };
    },
    fieldOf: (f) => (f === 'code' ? sourceField : f),
  };
}

/** A tool taking every field of an op's validation class but `type` and `op`. */
function opTool(
  kind: 'file' | 'browser',
  name: string,
  op: string,
  cls: { name: string },
  description: string,
): ToolDefinition {
  const fields = Object.keys(dtoSchema(cls).properties ?? {}).filter((f) => f !== 'type' && f !== 'op');
  return {
    name,
    description,
    inputSchema: derive(cls, fields),
    kind,
    fields,
    toAction: (input) => ({ ...input, type: kind, op }),
    fieldOf: (f) => f,
  };
}

function fileTool(name: string, op: keyof typeof FILE_ACTION_DTOS, description: string): ToolDefinition {
  return opTool('file', name, op, FILE_ACTION_DTOS[op], description);
}

/** `browser_<op>`: the op's fields, its description from the validation class. */
function browserTool(op: keyof typeof BROWSER_ACTION_DTOS): ToolDefinition {
  const cls = BROWSER_ACTION_DTOS[op];
  const description = `Browser (the session's own Chromium): ${dtoSchema(cls).description ?? op}`;
  return opTool('browser', `browser_${op}`, op, cls, description);
}

/** Built-in descriptions; a TOML file can override them without a rebuild (see `ToolDescriptions`). */
export const BUILTIN_DESCRIPTIONS: Record<string, string> = {
  bash: 'Run bash commands in the session workspace (a sandbox picked by risk). Returns stdout, stderr and the exit code.',
  python:
    'Run a Python 3 program in the session workspace (a sandbox picked by risk). Returns stdout, stderr and the exit code.',
  node: 'Run a Node.js program in the session workspace (a sandbox picked by risk). Returns stdout, stderr and the exit code.',
  read: 'Read a text file of the workspace, optionally a range of lines.',
  write: 'Write a file in the workspace (overwrite, append, or create only).',
  edit: 'Replace an exact string in a workspace file.',
  ls: 'List a workspace directory.',
  find: 'Find workspace files by glob pattern.',
  grep: 'Search workspace files for a regular expression.',
};

/** The engine's tools, in a stable order. */
export function buildToolCatalog(): ToolDefinition[] {
  const d = BUILTIN_DESCRIPTIONS;
  return [
    codeTool('bash', d.bash),
    codeTool('python', d.python),
    codeTool('node', d.node),
    fileTool('read', 'read', d.read),
    fileTool('write', 'write', d.write),
    fileTool('edit', 'edit', d.edit),
    fileTool('ls', 'list', d.ls),
    fileTool('find', 'find', d.find),
    fileTool('grep', 'grep', d.grep),
    ...(Object.keys(BROWSER_ACTION_DTOS) as Array<keyof typeof BROWSER_ACTION_DTOS>).map(browserTool),
  ];
}
