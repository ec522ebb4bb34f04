import { InvalidInputError } from '@switchyard/common';
import { validateEnv } from '@switchyard/sandbox';
import { parse } from 'smol-toml';

/** Template files are `<name>.toml` in the templates directory. */
export const TEMPLATE_EXTENSION = '.toml';

/** Package managers a template installs with, in this order. */
export const PACKAGE_KINDS = ['debian', 'pip', 'npm'] as const;
export type PackageKind = (typeof PACKAGE_KINDS)[number];

/**
 * One sandbox template (`docker/templates/<name>.toml`): packages installed on top of the default sandbox image by
 * `node scripts/sandbox-image.mjs --template <name>`, or an image used as is.
 */
export interface TemplateDefinition {
  name: string;
  description: string;
  /** An image used as is instead of packages (`image = "registry.example/team/sandbox:1.2"`). */
  image?: string;
  packages: Record<PackageKind, string[]>;
  /** Set in the image and for every run of a session with the template. */
  env: Record<string, string>;
}

/** A template file that cannot be used; the message says what is wrong, not which file. */
export class TemplateFileError extends Error {
  override readonly name = 'TemplateFileError';
}

// These rules are those of scripts/sandbox-templates.mjs, which builds the images (a unit test checks that both agree);
// the engine also refuses env names a caller could not set.
export const TEMPLATE_NAME = /^[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?$/;
const IMAGE_REF = /^[\w][\w.\-/:@]*$/;
const PACKAGE_PATTERNS: Record<PackageKind, RegExp> = {
  debian: /^[a-z0-9][a-z0-9+.-]+(?:=[A-Za-z0-9.+~:-]+)?$/,
  pip: /^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?(?:\[[A-Za-z0-9._-]+(?:,[A-Za-z0-9._-]+)*\])?(?:(?:===|==|!=|<=|>=|~=|<|>)[A-Za-z0-9.*+!_-]+(?:,(?:===|==|!=|<=|>=|~=|<|>)[A-Za-z0-9.*+!_-]+)*)?$/,
  npm: /^(?:@[a-z0-9][a-z0-9._~-]*\/)?[a-z0-9][a-z0-9._~-]*(?:@[A-Za-z0-9.^~<>=*+-]+)?$/,
};
const ENV_KEY = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_PACKAGES = 256;
const MAX_PACKAGE_CHARS = 214;
const MAX_ENV = 64;
const MAX_ENV_VALUE_BYTES = 4096;
const MAX_DESCRIPTION = 300;
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u001f\u007f]/;
const KNOWN_KEYS = new Set(['description', 'image', ...PACKAGE_KINDS, 'env']);

const isTable = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v) && !(v instanceof Date);

/** Parses and checks one template file's text. Throws `TemplateFileError` naming the key at fault. */
export function parseTemplateFile(name: string, text: string): TemplateDefinition {
  if (!TEMPLATE_NAME.test(name)) {
    throw new TemplateFileError(
      `the name "${name}" must be lower-case letters, digits and inner dashes (at most 63)`,
    );
  }
  let doc: Record<string, unknown>;
  try {
    doc = parse(text);
  } catch (err) {
    throw new TemplateFileError(`not valid TOML: ${(err as Error).message.split('\n')[0]}`);
  }
  for (const key of Object.keys(doc)) {
    if (!KNOWN_KEYS.has(key)) throw new TemplateFileError(`unknown key "${key}"`);
  }
  const description = doc.description ?? '';
  if (typeof description !== 'string' || description.length > MAX_DESCRIPTION || CONTROL.test(description)) {
    throw new TemplateFileError(
      `description must be one line of text, at most ${MAX_DESCRIPTION} characters`,
    );
  }
  const packages = {} as Record<PackageKind, string[]>;
  for (const kind of PACKAGE_KINDS) packages[kind] = packageList(kind, doc[kind]);
  const env = templateEnv(doc.env);
  const image = doc.image;
  if (image !== undefined) {
    if (typeof image !== 'string' || image.length > 255 || !IMAGE_REF.test(image)) {
      throw new TemplateFileError('image must be an image reference like registry.example/team/sandbox:1.2');
    }
    const listed = PACKAGE_KINDS.filter((k) => packages[k].length > 0);
    if (listed.length > 0) {
      throw new TemplateFileError(
        `an image template is used as is: remove the [${listed.join('], [')}] packages or the image`,
      );
    }
  }
  return { name, description, ...(image !== undefined && { image }), packages, env };
}

function packageList(kind: PackageKind, table: unknown = {}): string[] {
  if (!isTable(table)) throw new TemplateFileError(`[${kind}] must be a table`);
  for (const key of Object.keys(table)) {
    if (key !== 'packages') throw new TemplateFileError(`unknown key "${key}" in [${kind}]`);
  }
  const list = table.packages ?? [];
  if (!Array.isArray(list) || list.length > MAX_PACKAGES) {
    throw new TemplateFileError(`${kind}.packages must be an array of at most ${MAX_PACKAGES} strings`);
  }
  for (const p of list as unknown[]) {
    if (typeof p !== 'string' || p.length > MAX_PACKAGE_CHARS || !PACKAGE_PATTERNS[kind].test(p)) {
      throw new TemplateFileError(`${kind}.packages: ${JSON.stringify(p)} is not a ${kind} package spec`);
    }
  }
  return [...(list as string[])];
}

/** The `[env]` table: one-line strings, and only names a caller may set too (no `PATH`, `LD_*`, `PYTHON*`…). */
function templateEnv(table: unknown = {}): Record<string, string> {
  if (!isTable(table)) throw new TemplateFileError('[env] must be a table of strings');
  const entries = Object.entries(table);
  if (entries.length > MAX_ENV) throw new TemplateFileError(`[env] has more than ${MAX_ENV} entries`);
  for (const [key, value] of entries) {
    if (!ENV_KEY.test(key)) throw new TemplateFileError(`env.${key}: the name must match ${ENV_KEY.source}`);
    if (typeof value !== 'string') throw new TemplateFileError(`env.${key} must be a string`);
    if (CONTROL.test(value) || Buffer.byteLength(value) > MAX_ENV_VALUE_BYTES) {
      throw new TemplateFileError(
        `env.${key} must be one line without control characters, at most ${MAX_ENV_VALUE_BYTES} bytes`,
      );
    }
  }
  try {
    return { ...validateEnv(table) };
  } catch (err) {
    if (err instanceof InvalidInputError) throw new TemplateFileError(`${err.field}: ${err.message}`);
    throw err;
  }
}
