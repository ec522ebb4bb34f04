import { IsOptional, IsString, Matches } from 'class-validator';
import { configFailure } from './config-error';
import { ListVar } from './env-parsing';

/** Secrets to redact from every output, besides the built-in credential shapes. */
export class RedactionEnv {
  /** Env variables whose values are secrets to redact from every output (besides *KEY*, *TOKEN*, *SECRET*…). */
  @ListVar()
  @Matches(/^[A-Za-z_][A-Za-z0-9_]*$/, { each: true, message: 'each must be an environment variable name' })
  SWITCHYARD_SECRET_ENV_NAMES: string[] = [];

  /** Extra secret patterns to redact, as a JSON array of regular expressions: `["acme_[0-9a-f]{32}"]`. */
  @IsOptional()
  @IsString()
  SWITCHYARD_SECRET_PATTERNS?: string = undefined;
}

export interface RedactionConfig {
  /** Compiled from SWITCHYARD_SECRET_PATTERNS. */
  patterns: RegExp[];
  /** Literal values of the SWITCHYARD_SECRET_ENV_NAMES variables, as patterns. */
  values: RegExp[];
  /**
   * Values of the engine's own secret-looking variables (names containing KEY, TOKEN, SECRET, PASSWORD, PASSWD or
   * CREDENTIAL, values of 8+ characters). They never reach sandboxed code; redacting them catches them if they
   * reach it some other way (a file in the workspace).
   */
  engineSecrets: string[];
}

const SECRET_NAME = /KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL/i;

const literal = (value: string): RegExp => new RegExp(value.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'), 'g');

function parseSecretPatterns(raw: string | undefined): RegExp[] {
  if (raw === undefined || raw.trim() === '') return [];
  const fail = (message: string): never => configFailure('SWITCHYARD_SECRET_PATTERNS', message);
  let list: unknown;
  try {
    list = JSON.parse(raw);
  } catch {
    return fail('must be a JSON array of regular expressions, e.g. ["acme_[0-9a-f]{32}"]');
  }
  if (!Array.isArray(list) || !list.every((p) => typeof p === 'string' && p.length > 0)) {
    return fail('must be a JSON array of non-empty strings');
  }
  return (list as string[]).map((source) => {
    let re: RegExp;
    try {
      re = new RegExp(source, 'g');
    } catch (err) {
      return fail(`pattern ${JSON.stringify(source)}: ${(err as Error).message}`);
    }
    if (re.test('')) fail(`pattern ${JSON.stringify(source)} matches the empty string`);
    re.lastIndex = 0;
    return re;
  });
}

/** `env` is the whole environment: the named secrets are read from it. */
export function redactionConfig(parsed: RedactionEnv, env: NodeJS.ProcessEnv): RedactionConfig {
  return {
    patterns: parseSecretPatterns(parsed.SWITCHYARD_SECRET_PATTERNS),
    values: parsed.SWITCHYARD_SECRET_ENV_NAMES.flatMap((name) => {
      const value = env[name];
      return value && value.length >= 4 ? [literal(value)] : [];
    }),
    engineSecrets: Object.entries(env).flatMap(([name, value]) =>
      SECRET_NAME.test(name) && value !== undefined && value.length >= 8 ? [value] : [],
    ),
  };
}
