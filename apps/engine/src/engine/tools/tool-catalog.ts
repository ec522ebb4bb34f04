import type { ActionType } from '@switchyard/common';
import { validationMetadatasToSchemas } from 'class-validator-jsonschema';
import { BROWSER_ACTION_DTOS } from '../actions/dto/browser-action.dto';
import { CodeActionDto } from '../actions/dto/code-action.dto';
import { FILE_ACTION_DTOS } from '../actions/dto/file-action.dto';
import { KERNEL_ACTION_DTOS } from '../actions/dto/kernel-action.dto';
import { PROCESS_ACTION_DTOS } from '../actions/dto/process-action.dto';
import { SHELL_PROCESS_OPS } from '../../gates/policies/action-facts';

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
  /**
   * Action fields the tool names differently (action field → tool input field), so that error messages name the
   * fields a model sent. Fields missing here have the same name in both.
   */
  renames: Readonly<Record<string, string>>;
  /** Fields the tool takes. */
  fields: string[];
  kind: ActionType;
  /** Its input is checked by its own schema only (a skill's): fields beyond `fields` are not refused here. */
  openInput?: boolean;
  /** The language it runs (a skill's body, a process's shell command), for policies that match on it. */
  language?: string;
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
    ['code', 'timeoutMs', 'state'],
    { code: sourceField },
    {
      [sourceField]:
        language === 'bash'
          ? 'The bash command(s) to run in the session workspace.'
          : `The ${language} code to run in the session workspace.`,
      state:
        "session (default here): run in the session's persistent kernel, so state from earlier calls is there; " +
        'fresh: a new interpreter for this call only.',
    },
  );
  return {
    name: language,
    description,
    inputSchema,
    kind: 'code',
    fields: Object.keys(inputSchema.properties),
    // Models expect a persistent shell and interpreter: tool calls run in the session kernel unless told otherwise.
    toAction: (input) => {
      const { [sourceField]: code, state, ...rest } = input;
      return { ...rest, type: 'code', language, code, state: state ?? 'session' };
    },
    renames: { code: sourceField },
  };
}

/** A tool taking every field of an op's validation class but `type` and `op`. */
function opTool(
  kind: Exclude<ActionType, 'code'>,
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
    renames: {},
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

/** `process_<op>`: a background process op; `start` and `write` run shell text, so they are bash to policies. */
function processTool(op: keyof typeof PROCESS_ACTION_DTOS, description: string): ToolDefinition {
  const tool = opTool('process', `process_${op}`, op, PROCESS_ACTION_DTOS[op], description);
  return SHELL_PROCESS_OPS.has(op) ? { ...tool, language: 'bash' } : tool;
}

/** Built-in descriptions; a TOML file can override them without a rebuild (see `ToolDescriptions`). */
export const BUILTIN_DESCRIPTIONS: Record<string, string> = {
  bash:
    'Run bash commands in the session workspace (a sandbox picked by risk). One persistent shell per session: the ' +
    'working directory, exported variables and functions stay between calls (state: "fresh" for a clean shell). ' +
    'Returns stdout, stderr and the exit code.',
  python:
    'Run Python 3 code in the session workspace (a sandbox picked by risk). One persistent interpreter per session: ' +
    'variables, imports and functions stay between calls, and the value of a final expression is returned, as in a ' +
    'notebook (state: "fresh" for a clean interpreter). Returns stdout, stderr, the result and the exit code.',
  node:
    'Run JavaScript in a persistent Node.js context in the session workspace (a sandbox picked by risk): ' +
    "declarations stay between calls, top-level await works, the final expression's value is returned " +
    '(state: "fresh" for a clean context). Returns stdout, stderr, the result and the exit code.',
  read:
    'Read a file of the workspace: a text file, optionally a range of lines; a PNG, JPEG, GIF or WebP image is ' +
    'answered as an image.',
  write: 'Write a file in the workspace (overwrite, append, or create only).',
  edit: 'Replace an exact string in a workspace file.',
  ls: 'List a workspace directory.',
  find: 'Find workspace files by glob pattern.',
  grep: 'Search workspace files for a regular expression.',
  process_start:
    "Start a background process (e.g. a dev server) that keeps running between calls; the session's bash, python " +
    'and node tools reach it on localhost. Returns its processId.',
  process_list: "List the session's background processes.",
  process_logs: "Read a background process's output (the last chunks, or those after a seq).",
  process_write: "Write text to a background process's standard input.",
  process_signal:
    'Send a signal (TERM, INT, KILL, HUP, USR1, USR2) to a background process and its children.',
  process_stop: 'Stop a background process and everything it started.',
  process_wait: 'Wait for a background process to exit (bounded by timeoutMs).',
  kernel_restart:
    "Restart the session's persistent python, node or bash interpreter: clears its variables, imports, functions " +
    'and (bash) working directory, e.g. after a bad state or a stuck import.',
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
    ...(Object.keys(PROCESS_ACTION_DTOS) as Array<keyof typeof PROCESS_ACTION_DTOS>).map((op) =>
      processTool(op, d[`process_${op}`]),
    ),
    opTool('kernel', 'kernel_restart', 'restart', KERNEL_ACTION_DTOS.restart, d.kernel_restart),
    ...(Object.keys(BROWSER_ACTION_DTOS) as Array<keyof typeof BROWSER_ACTION_DTOS>).map(browserTool),
  ];
}
