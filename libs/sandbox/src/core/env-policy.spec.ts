import { InvalidInputError } from '@switchyard/common';
import { BASE_ENV, buildChildEnv, egressEnv, ENV_LIMITS, trustedCaEnv, validateEnv } from './env-policy';

function rejection(env: unknown): InvalidInputError {
  try {
    validateEnv(env);
  } catch (err) {
    expect(err).toBeInstanceOf(InvalidInputError);
    return err as InvalidInputError;
  }
  throw new Error(`expected ${JSON.stringify(env)} to be rejected`);
}

describe('validateEnv', () => {
  it('accepts ordinary variables and returns a copy', () => {
    const env = { FOO: 'bar', _x1: '', PYTHONIOENCODING: 'utf-8', NODE_ENV: 'test', LANG: 'de_DE.UTF-8' };
    const out = validateEnv(env);
    expect({ ...out }).toEqual(env);
    expect(out).not.toBe(env);
    expect(validateEnv(undefined)).toEqual({});
  });

  it.each([
    'LD_PRELOAD',
    'LD_LIBRARY_PATH',
    'LD_AUDIT',
    'LD_BIND_NOW',
    'ld_preload',
    'NODE_OPTIONS',
    'NODE_PATH',
    'BASH_ENV',
    'BASH_XTRACEFD',
    'ENV',
    'PATH',
    'Path',
    'HOME',
    'PYTHONPATH',
    'PYTHONSTARTUP',
    'PYTHONHOME',
    'PYTHONBREAKPOINT',
    'PYTHONWARNINGS',
    'PERL5OPT',
    'IFS',
    'PS4',
    'SHELLOPTS',
    'BASHOPTS',
    'GLIBC_TUNABLES',
    'GCONV_PATH',
    'OPENSSL_CONF',
  ])('denies %s with field env.%s', (key) => {
    const err = rejection({ [key]: 'x' });
    expect(err.field).toBe(`env.${key}`);
    expect(err.code).toBe('ENV_KEY_DENIED');
  });

  it.each(['A B', ' A', 'A\tB', 'A\0B', 'A=B', '1ABC', '', 'A-B', 'Ä', 'BASH_FUNC_x%%'])(
    'rejects the malformed key %j',
    (key) => {
      const err = rejection({ [key]: 'x' });
      expect(err.field).toBe(`env.${key}`);
      expect(err.code).toBe('ENV_KEY_INVALID');
    },
  );

  it('rejects NUL in values and non-string values', () => {
    expect(rejection({ A: 'x\0y' })).toMatchObject({ field: 'env.A', code: 'ENV_VALUE_INVALID' });
    expect(rejection({ A: 1 })).toMatchObject({ field: 'env.A', code: 'ENV_VALUE_INVALID' });
  });

  it('rejects a non-object env', () => {
    for (const env of [null, 'A=1', ['A'], 3]) expect(rejection(env).field).toBe('env');
  });

  it('bounds entries, value size and total size', () => {
    const many = Object.fromEntries(
      Array.from({ length: ENV_LIMITS.maxEntries + 1 }, (_, i) => [`K${i}`, 'v']),
    );
    expect(rejection(many)).toMatchObject({ field: 'env', code: 'ENV_TOO_LARGE' });
    expect(() =>
      validateEnv(
        Object.fromEntries(Array.from({ length: ENV_LIMITS.maxEntries }, (_, i) => [`K${i}`, 'v'])),
      ),
    ).not.toThrow();
    expect(rejection({ BIG: 'x'.repeat(ENV_LIMITS.maxValueBytes + 1) })).toMatchObject({ field: 'env.BIG' });
    expect(() => validateEnv({ BIG: 'x'.repeat(ENV_LIMITS.maxValueBytes) })).not.toThrow();
    const total = Object.fromEntries(
      Array.from({ length: 9 }, (_, i) => [`K${i}`, 'x'.repeat(ENV_LIMITS.maxValueBytes)]),
    );
    expect(rejection(total)).toMatchObject({ field: 'env', code: 'ENV_TOO_LARGE' });
  });

  it('counts value size in UTF-8 bytes', () => {
    expect(rejection({ A: 'é'.repeat(ENV_LIMITS.maxValueBytes / 2 + 1) }).field).toBe('env.A');
  });

  it('keeps a key named __proto__ as an ordinary entry', () => {
    const out = validateEnv(JSON.parse('{"__proto__": "x"}'));
    expect(Object.keys(out)).toEqual(['__proto__']);
  });
});

describe('buildChildEnv', () => {
  const canary = 'SWITCHYARD_ENGINE_CANARY_ENV';

  beforeAll(() => (process.env[canary] = 'engine-secret'));
  afterAll(() => delete process.env[canary]);

  it('starts from the fixed base, adds language entries, then the caller’s', () => {
    const env = buildChildEnv({ FOO: 'bar', LANG: 'C' }, 'python');
    expect(env).toMatchObject({
      ...BASE_ENV,
      LANG: 'C',
      FOO: 'bar',
      PYTHONUNBUFFERED: '1',
      PYTHONDONTWRITEBYTECODE: '1',
    });
    // The system first; then what the session installed for its user, in its home.
    expect(env.PATH).toBe(
      '/usr/local/bin:/usr/bin:/bin:/opt/switchyard/bin:/workspace/.home/.local/bin:/workspace/.home/.npm-global/bin',
    );
    expect(env.HOME).toBe('/workspace/.home');
    expect(env.npm_config_prefix).toBe('/workspace/.home/.npm-global');
    expect(buildChildEnv({}, 'bash').PYTHONPATH).toBeUndefined();
  });

  it('never copies the engine’s own environment', () => {
    for (const lang of ['python', 'node', 'bash'] as const) {
      const env = buildChildEnv({}, lang);
      expect(env[canary]).toBeUndefined();
      const languageKeys = ['PYTHONDONTWRITEBYTECODE', 'PYTHONUNBUFFERED', 'NODE_PATH'];
      expect(Object.keys(env).filter((k) => !(k in BASE_ENV) && !languageKeys.includes(k))).toEqual([]);
    }
  });
});

describe('package installs', () => {
  it('let plain `pip install` fall back to the user site under HOME in every sandbox, network or not', () => {
    for (const lang of ['python', 'node', 'bash'] as const) {
      expect(buildChildEnv({}, lang)).toMatchObject({ PIP_BREAK_SYSTEM_PACKAGES: '1', HOME: BASE_ENV.HOME });
    }
    // Not PIP_USER: pip refuses `--user` inside a venv, and the fallback already picks the user site.
    expect(BASE_ENV.PIP_USER).toBeUndefined();
    expect(egressEnv().PIP_USER).toBeUndefined();
  });

  it("point pip, Python, curl, git and npm at the bundle, and Node at the operator's certificates alone", () => {
    const env = trustedCaEnv({ bundle: '/d/sandbox-ca/ca-bundle.pem', extra: '/d/sandbox-ca/extra-ca.pem' });
    for (const key of [
      'SSL_CERT_FILE',
      'REQUESTS_CA_BUNDLE',
      'PIP_CERT',
      'CURL_CA_BUNDLE',
      'GIT_SSL_CAINFO',
    ]) {
      expect(env[key]).toBe('/d/sandbox-ca/ca-bundle.pem');
    }
    expect(env.NODE_EXTRA_CA_CERTS).toBe('/d/sandbox-ca/extra-ca.pem');
  });
});
