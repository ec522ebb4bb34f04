import { InvalidInputError } from '@switchyard/common';
import { IsOptional, IsString, MinLength } from 'class-validator';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parse as parseToml } from 'smol-toml';
import { type HookDefinition, readHooks } from '../hooks/hook-file';
import { configFailure } from './config-error';
import { IntVar } from './env-parsing';

const VARIABLE = 'SWITCHYARD_HOOKS_FILE';

/** HTTP endpoints that see every action before it runs and its result after. */
export class HooksEnv {
  /** JSON (`{"hooks": [...]}`) or TOML (`[[hooks]]`) file of before- and after-action hooks. Unset: no hooks. */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_HOOKS_FILE?: string = undefined;

  /** After-hook deliveries kept waiting at most; past it the oldest is dropped (and recorded as dropped). */
  @IntVar(1, 1_000_000)
  SWITCHYARD_HOOK_QUEUE = 10_000;

  /** After-hook deliveries under way at once. */
  @IntVar(1, 64)
  SWITCHYARD_HOOK_CONCURRENCY = 4;
}

export interface HooksConfig {
  file?: string;
  hooks: HookDefinition[];
  queue: number;
  concurrency: number;
}

function readHooksFile(file: string): HookDefinition[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    configFailure(VARIABLE, `${file}: ${(err as Error).message}`);
  }
  let doc: unknown;
  try {
    doc = file.endsWith('.toml') ? parseToml(text) : JSON.parse(text);
  } catch (err) {
    configFailure(
      VARIABLE,
      `${file} is not valid ${file.endsWith('.toml') ? 'TOML' : 'JSON'}: ${(err as Error).message}`,
    );
  }
  try {
    return readHooks(doc);
  } catch (err) {
    if (err instanceof InvalidInputError) configFailure(VARIABLE, `${file}: ${err.field}: ${err.message}`);
    throw err;
  }
}

export function hooksConfig(env: HooksEnv, cwd: string): HooksConfig {
  const file = env.SWITCHYARD_HOOKS_FILE && path.resolve(cwd, env.SWITCHYARD_HOOKS_FILE);
  return {
    ...(file && { file }),
    hooks: file ? readHooksFile(file) : [],
    queue: env.SWITCHYARD_HOOK_QUEUE,
    concurrency: env.SWITCHYARD_HOOK_CONCURRENCY,
  };
}
