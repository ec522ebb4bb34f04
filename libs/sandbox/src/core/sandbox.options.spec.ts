import { REDACTED, OutputCollector } from './output-collector';
import { SandboxConfigError } from './sandbox.errors';
import {
  checkIntegers,
  engineSecretPatterns,
  type IntegerOption,
  resolveSandboxOptions,
  secretValuePatterns,
} from './sandbox.options';

const redact = (patterns: readonly RegExp[], text: string) => {
  const c = new OutputCollector({ maxBytes: 1000, maxLines: 100, redact: patterns });
  c.push(Buffer.from(text));
  return c.text();
};

describe('engine secrets', () => {
  const env = {
    DB_PASSWORD: 'hunter2-hunter2',
    API_TOKEN: 'short',
    HOME: '/root/secret-home',
    X_KEY: undefined,
  };

  it('redacts the values of the secret-looking variables of the env it is given, 8 characters or more', () => {
    const patterns = engineSecretPatterns(env);
    expect(patterns).toHaveLength(1);
    expect(redact(patterns, 'pw hunter2-hunter2 short /root/secret-home\n')).toBe(
      `pw ${REDACTED} short /root/secret-home\n`,
    );
  });

  it('takes values literally', () => {
    expect(redact(secretValuePatterns(['a.b*c']), 'a.b*c axbbc\n')).toBe(`${REDACTED} axbbc\n`);
  });

  it('reads no environment of its own', () => {
    const name = 'SY_OPTIONS_SPEC_API_KEY';
    process.env[name] = 'never-read-by-the-library';
    try {
      expect(engineSecretPatterns()).toEqual([]);
      const { output } = resolveSandboxOptions({ output: { redact: [] } });
      expect(output.redact).toEqual([]);
    } finally {
      delete process.env[name];
    }
  });

  it('adds the engine env’s secrets to the output patterns unless asked not to', () => {
    const withEnv = resolveSandboxOptions({ output: { redact: [], engineEnv: env } }).output;
    expect(redact(withEnv.redact!, 'hunter2-hunter2\n')).toBe(`${REDACTED}\n`);
    const without = resolveSandboxOptions({
      output: { redact: [], engineEnv: env, redactEngineSecrets: false },
    });
    expect(without.output.redact).toEqual([]);
  });
});

describe('checkIntegers', () => {
  it.each<[IntegerOption, string]>([
    [['a', 0, 1], 'sandbox option p.a: must be a positive integer, got 0'],
    [['a', -1, 0], 'sandbox option p.a: must be a non-negative integer, got -1'],
    [['a', 3, 4], 'sandbox option p.a: must be an integer of at least 4, got 3'],
    [['a', 65, 0, 64], 'sandbox option p.a: must be an integer from 0 to 64, got 65'],
    [['a', 1.5, 0, 64], 'sandbox option p.a: must be an integer from 0 to 64, got 1.5'],
    [['a', Number.NaN, 1], 'sandbox option p.a: must be a positive integer, got NaN'],
  ])('refuses %j', (option, message) => {
    expect(() => checkIntegers([option], 'p.')).toThrow(SandboxConfigError);
    expect(() => checkIntegers([option], 'p.')).toThrow(message);
  });

  it('accepts integers within range, bounds included', () => {
    expect(() =>
      checkIntegers([
        ['a', 1, 1],
        ['b', 0, 0, 64],
        ['c', 64, 0, 64],
      ]),
    ).not.toThrow();
  });

  it('names the first bad option of a resolver', () => {
    expect(() => resolveSandboxOptions({ subprocess: { warmSlots: 65, pids: 0 } })).toThrow(
      'sandbox option subprocess.pids: must be a positive integer, got 0',
    );
    expect(() => resolveSandboxOptions({ subprocess: { warmSlots: 65 } })).toThrow(
      'sandbox option subprocess.warmSlots: must be an integer from 0 to 64, got 65',
    );
  });
});
