import { IsOptional, Matches } from 'class-validator';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ConfigError } from './config-error';

const VARIABLE = 'SWITCHYARD_TEMPLATES_DIR';

/** A word a shell reads back as is. */
const shellWord = (s: string): string => (/^[\w@%+=:,./-]+$/.test(s) ? s : `'${s.replace(/'/g, `'\\''`)}'`);

/** Sandbox templates: images with packages on top of the default sandbox image, picked per session. */
export class TemplatesEnv {
  /**
   * Directory of the template files (`<name>.toml`); every file is checked at start-up and one that cannot be used
   * stops the engine naming the file. Default `docker/templates` in the working directory.
   */
  @IsOptional()
  @Matches(/^[^\0]+$/, { message: 'must be a directory path' })
  SWITCHYARD_TEMPLATES_DIR?: string = undefined;
}

export interface TemplatesConfig {
  /** Absolute path of the templates directory (it may be absent when not set explicitly: no templates). */
  dir: string;
  /** Where `scripts/sandbox-image.mjs` records each template's last build (`<name>.tag`): `.runtime/templates`. */
  stateDir: string;
  /** The command that builds a template, as an operator would type it from the working directory. */
  buildCommand: (name: string) => string;
}

/**
 * Resolves the directory (relative to `cwd`). The templates module reads every template in it once at boot (a file
 * that cannot be used stops start-up naming the file), and again when asked (an edited file shows as `stale`).
 */
export function templatesConfig(
  env: TemplatesEnv,
  cwd: string,
  sandboxImageEnv: string | undefined,
): TemplatesConfig {
  const dir = path.resolve(cwd, env.SWITCHYARD_TEMPLATES_DIR ?? path.join('docker', 'templates'));
  try {
    if (!fs.statSync(dir).isDirectory())
      throw new ConfigError([{ variable: VARIABLE, message: `${dir} is not a directory` }]);
  } catch (err) {
    if (err instanceof ConfigError) throw err;
    const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
    // The default directory may be absent (no templates); one that was named must exist.
    if (!missing || env.SWITCHYARD_TEMPLATES_DIR !== undefined) {
      throw new ConfigError([{ variable: VARIABLE, message: `${dir}: ${(err as Error).message}` }]);
    }
  }
  const prefix = [
    ...(env.SWITCHYARD_TEMPLATES_DIR !== undefined ? [`${VARIABLE}=${shellWord(dir)}`] : []),
    ...(sandboxImageEnv ? [`SWITCHYARD_SANDBOX_IMAGE=${shellWord(sandboxImageEnv)}`] : []),
  ];
  return {
    dir,
    stateDir: path.resolve(cwd, '.runtime', 'templates'),
    buildCommand: (name) => [...prefix, 'node', 'scripts/sandbox-image.mjs', '--template', name].join(' '),
  };
}
