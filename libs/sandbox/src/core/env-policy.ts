import { InvalidInputError, type Language } from '@switchyard/common';
import { CALL_SOCKET_ENV } from './sandbox.types';

/**
 * The environment a sandboxed child sees is built from scratch: `BASE_ENV`, a few per-language entries and the
 * caller's validated entries. The engine's own `process.env` (API keys, DOCKER_HOST, cloud credentials) is never
 * copied.
 *
 * The denylist exists because risk is scored on the submitted code: a variable that makes an interpreter, the
 * dynamic loader or a shell run something else (`LD_PRELOAD`, `NODE_OPTIONS=--require`, `BASH_ENV`,
 * `PYTHONSTARTUP`, a poisoned `PATH`) would run code the policy never saw.
 *
 * `HOME` is denied too: it decides where interpreters look for per-user startup code (Python's user
 * site-packages `.pth` files, `~/.node_modules`), so it stays fixed at `/tmp`.
 *
 * `SWITCHYARD_CALL_SOCKET` is the tier's to set (the action's call channel): a caller's own would point code that
 * trusts it at a socket the engine never made.
 */
export const ENV_LIMITS = Object.freeze({
  maxEntries: 64,
  maxValueBytes: 32 * 1024,
  maxTotalBytes: 256 * 1024,
});

/** Where a sandbox with network reaches the engine's egress proxy: the runner forwards it to the session's socket. */
export const EGRESS_PROXY_URL = 'http://127.0.0.1:3128';

/**
 * The environment that sends ordinary tools through the egress proxy (curl, pip, npm, git, Python's urllib and
 * requests, Node's fetch via the variables), for sandboxes whose session may reach the network. Packages installed
 * with pip go to the user site (HOME is /tmp: the session's container keeps them; the system is read-only).
 */
export function egressEnv(): Record<string, string> {
  const proxy = EGRESS_PROXY_URL;
  return {
    HTTP_PROXY: proxy,
    HTTPS_PROXY: proxy,
    http_proxy: proxy,
    https_proxy: proxy,
    NO_PROXY: 'localhost,127.0.0.1,::1',
    no_proxy: 'localhost,127.0.0.1,::1',
    npm_config_proxy: proxy,
    npm_config_https_proxy: proxy,
    PIP_USER: '1',
    PIP_BREAK_SYSTEM_PACKAGES: '1',
    PIP_DISABLE_PIP_VERSION_CHECK: '1',
  };
}

/** Where the tiers put helper commands (the subprocess tier's `python`, when the host has only `python3`). */
export const SANDBOX_BIN = '/opt/switchyard/bin';

export const BASE_ENV: Readonly<Record<string, string>> = Object.freeze({
  // Last, so a system `python` wins where there is one; SANDBOX_BIN only fills what the system lacks.
  PATH: `/usr/local/bin:/usr/bin:/bin:${SANDBOX_BIN}`,
  HOME: '/tmp',
  TMPDIR: '/tmp',
  LANG: 'C.UTF-8',
  TERM: 'dumb',
  USER: 'nobody',
});

/**
 * Per-language entries. Node finds packages installed in the workspace through NODE_PATH (which loads nothing by
 * itself). Python gets no PYTHONPATH: a `sitecustomize.py` on it would run before the code; the tier puts the
 * workspace on sys.path the way `python -c` does instead.
 */
const LANGUAGE_ENV: Record<Language, Record<string, string>> = {
  python: { PYTHONDONTWRITEBYTECODE: '1', PYTHONUNBUFFERED: '1' },
  node: { NODE_PATH: '/workspace/node_modules' },
  bash: {},
};

const KEY_PATTERN = /^[A-Za-z_][A-Za-z0-9_]*$/;

const DENIED_KEYS = new Set([
  'PATH',
  'HOME',
  'ENV',
  'BASHOPTS',
  'SHELLOPTS',
  'IFS',
  'PS4',
  'CDPATH',
  'GLOBIGNORE',
  'PROMPT_COMMAND',
  'GLIBC_TUNABLES',
  'GCONV_PATH',
  'LOCPATH',
  'HOSTALIASES',
  'OPENSSL_CONF',
  'OPENSSL_ENGINES',
  'PERL5OPT',
  'PERL5LIB',
  'PERLLIB',
  'RUBYOPT',
  'RUBYLIB',
  'JAVA_TOOL_OPTIONS',
  '_JAVA_OPTIONS',
  CALL_SOCKET_ENV,
]);

/** Dynamic loader (`LD_PRELOAD`, `LD_AUDIT`, …) and bash's own knobs (`BASH_ENV`, `BASH_XTRACEFD`, …). */
const DENIED_PREFIXES = ['LD_', 'DYLD_', 'BASH_'];

/**
 * `PYTHON*` and `NODE_*` are denied wholesale (PYTHONSTARTUP, PYTHONPATH, PYTHONHOME, PYTHONBREAKPOINT,
 * PYTHONWARNINGS can import arbitrary modules; NODE_OPTIONS, NODE_PATH change what runs); these are harmless.
 */
const ALLOWED_IN_DENIED_FAMILIES = new Set([
  'PYTHONIOENCODING',
  'PYTHONUTF8',
  'PYTHONHASHSEED',
  'PYTHONUNBUFFERED',
  'PYTHONDONTWRITEBYTECODE',
  'PYTHONFAULTHANDLER',
  'NODE_ENV',
  'NODE_NO_WARNINGS',
]);

function deniedReason(key: string): string | undefined {
  // Case-insensitive on purpose: nothing legitimate needs `ld_preload`, and some tools read lower-case variants.
  const upper = key.toUpperCase();
  if (ALLOWED_IN_DENIED_FAMILIES.has(upper)) return undefined;
  if (DENIED_KEYS.has(upper)) return `${key} is fixed by the sandbox or changes what the interpreter runs`;
  const prefix = DENIED_PREFIXES.find((p) => upper.startsWith(p));
  if (prefix) return `${prefix}* variables change what the loader or shell runs`;
  if (upper.startsWith('PYTHON') || upper.startsWith('NODE_')) {
    return `${key} can change what the interpreter loads; allowed: ${[...ALLOWED_IN_DENIED_FAMILIES].join(', ')}`;
  }
  return undefined;
}

/**
 * Validates a caller's `env` and returns a plain copy. Throws `InvalidInputError` with field `env.<KEY>` (or
 * `env` for the map itself) on the first problem.
 */
export function validateEnv(env: unknown): Record<string, string> {
  if (env === undefined) return {};
  if (env === null || typeof env !== 'object' || Array.isArray(env)) {
    throw new InvalidInputError('env', 'env must be an object of string values', 'ENV_INVALID');
  }
  const entries = Object.entries(env as Record<string, unknown>);
  if (entries.length > ENV_LIMITS.maxEntries) {
    throw new InvalidInputError(
      'env',
      `env has ${entries.length} entries; at most ${ENV_LIMITS.maxEntries}`,
      'ENV_TOO_LARGE',
    );
  }
  // Null prototype: a key named `__proto__` must stay an ordinary entry.
  const out = Object.create(null) as Record<string, string>;
  let total = 0;
  for (const [key, value] of entries) {
    const field = `env.${key}`;
    if (!KEY_PATTERN.test(key)) {
      throw new InvalidInputError(
        field,
        `env key ${JSON.stringify(key)} must match ${KEY_PATTERN.source} (no whitespace, NUL or "=")`,
        'ENV_KEY_INVALID',
      );
    }
    const denied = deniedReason(key);
    if (denied)
      throw new InvalidInputError(field, `env key ${key} is not allowed: ${denied}`, 'ENV_KEY_DENIED');
    if (typeof value !== 'string') {
      throw new InvalidInputError(field, `env value of ${key} must be a string`, 'ENV_VALUE_INVALID');
    }
    if (value.includes('\0')) {
      throw new InvalidInputError(field, `env value of ${key} contains a NUL byte`, 'ENV_VALUE_INVALID');
    }
    const bytes = Buffer.byteLength(value, 'utf8');
    if (bytes > ENV_LIMITS.maxValueBytes) {
      throw new InvalidInputError(
        field,
        `env value of ${key} is ${bytes} bytes; at most ${ENV_LIMITS.maxValueBytes}`,
        'ENV_TOO_LARGE',
      );
    }
    total += bytes + key.length + 2;
    if (total > ENV_LIMITS.maxTotalBytes) {
      // Keeps argv + envp well under ARG_MAX, so exec never fails with E2BIG.
      throw new InvalidInputError(
        'env',
        `env is over ${ENV_LIMITS.maxTotalBytes} bytes in total`,
        'ENV_TOO_LARGE',
      );
    }
    out[key] = value;
  }
  return out;
}

/** The child's complete environment: base, then language entries, then the caller's (already validated). */
export function buildChildEnv(validated: Record<string, string>, language: Language): Record<string, string> {
  return { ...BASE_ENV, ...LANGUAGE_ENV[language], ...validated };
}
