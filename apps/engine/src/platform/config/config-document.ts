import { InvalidInputError } from '@switchyard/common';
import * as fs from 'node:fs';
import { parse as parseToml } from 'smol-toml';
import { configFailure } from './config-error';

/**
 * Reads a JSON or TOML document a variable names (by the file's extension) and hands it to `read`, the feature's
 * own reader. Whatever cannot be used stops start-up naming the variable: an unreadable file, bad syntax, or the
 * field `read` refuses.
 */
export function readConfigDocument<T>(variable: string, file: string, read: (doc: unknown) => T): T {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    configFailure(variable, `${file}: ${(err as Error).message}`);
  }
  const toml = file.endsWith('.toml');
  let doc: unknown;
  try {
    doc = toml ? parseToml(text) : JSON.parse(text);
  } catch (err) {
    configFailure(variable, `${file} is not valid ${toml ? 'TOML' : 'JSON'}: ${(err as Error).message}`);
  }
  try {
    return read(doc);
  } catch (err) {
    if (err instanceof InvalidInputError) configFailure(variable, `${file}: ${err.field}: ${err.message}`);
    throw err;
  }
}
