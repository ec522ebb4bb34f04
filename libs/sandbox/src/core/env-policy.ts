import { InvalidInputError, type Language, SESSION_HOME } from '@switchyard/common';
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
 * site-packages `.pth` files, `~/.node_modules`), so it stays fixed at the session's home (`SESSION_HOME`,
 * `/workspace/.home`): the same in every tier, kept with the workspace, so what a session installs for its user is
 * there for every later action. What the session's own code put there runs again as the session's code, in whichever
 * tier the later action is routed to, like any file of its workspace it imports.
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
 * requests, Node's fetch via the variables), for sandboxes whose session may reach the network.
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
  };
}

/** The operator's extra trusted CAs as every sandbox sees them (the same paths in every tier). */
export interface TrustedCaFiles {
  /** The image's system CA bundle followed by the operator's certificates: for tools that replace the roots. */
  bundle: string;
  /** The operator's certificates alone: for Node, which adds them to its own roots. */
  extra: string;
}

/**
 * The variables that make pip, Python (ssl, requests), curl, git, npm and Node trust the operator's CAs (a
 * TLS-intercepting proxy, a mirror with a private CA) as well as the public ones.
 */
export function trustedCaEnv(files: TrustedCaFiles): Record<string, string> {
  return {
    SSL_CERT_FILE: files.bundle,
    REQUESTS_CA_BUNDLE: files.bundle,
    PIP_CERT: files.bundle,
    CURL_CA_BUNDLE: files.bundle,
    GIT_SSL_CAINFO: files.bundle,
    NODE_EXTRA_CA_CERTS: files.extra,
  };
}

/** Where the tiers put helper commands (the subprocess tier's `python`, when the host has only `python3`). */
export const SANDBOX_BIN = '/opt/switchyard/bin';

export const BASE_ENV: Readonly<Record<string, string>> = Object.freeze({
  // Last, so a system `python` wins where there is one; SANDBOX_BIN only fills what the system lacks.
  // Then what the session installed for its user: pip's scripts, `npm install -g`'s commands.
  PATH: `/usr/local/bin:/usr/bin:/bin:${SANDBOX_BIN}:${SESSION_HOME}/.local/bin:${SESSION_HOME}/.npm-global/bin`,
  HOME: SESSION_HOME,
  // The system's prefix is read-only: `npm install -g` installs into the session's home instead.
  npm_config_prefix: `${SESSION_HOME}/.npm-global`,
  TMPDIR: '/tmp',
  LANG: 'C.UTF-8',
  TERM: 'dumb',
  USER: 'nobody',
  // PEP 668 guards a system that pip could write to; a sandbox's system is read-only, so `pip install` (no flags)
  // falls back to the user site under $HOME ("normal site-packages is not writeable"), and into a venv when one is
  // active. Not PIP_USER=1: pip refuses `--user` inside a venv. Without this, a session without network got PEP 668's
  // error instead of the network failure its hint explains.
  PIP_BREAK_SYSTEM_PACKAGES: '1',
  PIP_DISABLE_PIP_VERSION_CHECK: '1',
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
