import { IsOptional, IsString, MinLength } from 'class-validator';
import * as path from 'node:path';
import { IntVar } from './env-parsing';

/** HTTP endpoints that see every action before it runs and its result after. */
export class HooksEnv {
  /**
   * JSON (`{"hooks": [...]}`) or TOML (`[[hooks]]`) file of before- and after-action hooks, read at start-up. Unset: no
   * hooks.
   */
  @IsOptional()
  @IsString()
  @MinLength(1)
  SWITCHYARD_HOOKS_FILE?: string = undefined;

  /**
   * After-hook deliveries kept waiting at most, per replica; past it the oldest is dropped (and recorded as dropped).
   */
  @IntVar(1, 1_000_000)
  SWITCHYARD_HOOK_QUEUE = 10_000;

  /** After-hook deliveries under way at once. */
  @IntVar(1, 64)
  SWITCHYARD_HOOK_CONCURRENCY = 4;
}

export interface HooksConfig {
  file?: string;
  queue: number;
  concurrency: number;
}

export function hooksConfig(env: HooksEnv, cwd: string): HooksConfig {
  const file = env.SWITCHYARD_HOOKS_FILE && path.resolve(cwd, env.SWITCHYARD_HOOKS_FILE);
  return {
    ...(file && { file }),
    queue: env.SWITCHYARD_HOOK_QUEUE,
    concurrency: env.SWITCHYARD_HOOK_CONCURRENCY,
  };
}
