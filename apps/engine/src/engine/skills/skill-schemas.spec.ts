import {
  checkWithin,
  compileSchema,
  MAX_SCHEMA_PATTERN_SIZE,
  SCHEMA_CHECK_TIMEOUT_MS,
  violation,
} from './skill-schemas';

/** Milliseconds `fn` takes. */
const timed = (fn: () => unknown): number => {
  const start = performance.now();
  fn();
  return performance.now() - start;
};

const withPattern = (pattern: string) => ({
  type: 'object',
  properties: { s: { type: 'string', pattern } },
});

describe('skill schemas: patterns run on RE2', () => {
  it('checks the issue’s pattern on its input in linear time (V8 took minutes)', () => {
    const schema = withPattern('^(a+)+$');
    compileSchema(schema);
    let found: ReturnType<typeof violation>;
    expect(timed(() => (found = violation(schema, { s: `${'a'.repeat(40)}!` }, 'input')))).toBeLessThan(100);
    expect(found!).toMatchObject({ path: 'input.s', schemaPath: '#/properties/s/pattern' });
    expect(violation(schema, { s: 'a'.repeat(40) }, 'input')).toBeUndefined();
    // A long input too.
    expect(timed(() => violation(schema, { s: `${'a'.repeat(200_000)}!` }, 'input'))).toBeLessThan(500);
  });

  it('applies patterns as JSON Schema means them: unanchored, in patternProperties and propertyNames too', () => {
    expect(violation(withPattern('b+'), { s: 'abbbc' }, 'input')).toBeUndefined();
    const keyed = { type: 'object', patternProperties: { '^x_(a|a)*$': { type: 'integer' } } };
    expect(violation(keyed, { x_aaa: 1 }, 'input')).toBeUndefined();
    expect(violation(keyed, { x_aaa: 'no' }, 'input')).toMatchObject({ path: 'input.x_aaa' });
    const names = { type: 'object', propertyNames: { pattern: '^[a-z]+$' } };
    expect(violation(names, { ok: 1 }, 'input')).toBeUndefined();
    expect(violation(names, { NO: 1 }, 'input')).toBeDefined();
  });

  it('makes a schema invalid when a pattern cannot run in linear time, saying which and why', () => {
    for (const [pattern, why] of [
      ['(a)\\1', 'back-references'],
      ['(?=a)b', 'lookarounds'],
      ['(?<!a)b', 'lookarounds'],
    ]) {
      const compiled = compileSchema(withPattern(pattern));
      expect(typeof compiled).toBe('string');
      expect(compiled).toContain(JSON.stringify(pattern));
      expect(compiled).toContain(why);
    }
    const keyed = compileSchema({ type: 'object', patternProperties: { '(x)\\1': { type: 'string' } } });
    expect(keyed).toContain('back-references');
  });

  it('bounds what all the patterns of one schema may compile to, refusing before compiling', () => {
    const many = {
      type: 'object',
      properties: Object.fromEntries(
        Array.from({ length: 40 }, (_, i) => [`p${i}`, { type: 'string', pattern: `[a-z]{1,100}${i}` }]),
      ),
    };
    let compiled: ReturnType<typeof compileSchema>;
    expect(timed(() => (compiled = compileSchema(many)))).toBeLessThan(1000);
    expect(compiled!).toContain(`${MAX_SCHEMA_PATTERN_SIZE} together`);
    expect(typeof compileSchema(withPattern('[a-z]{1,1000}'.repeat(20)))).toBe('string');
    expect(typeof compileSchema(withPattern('^[a-z]{1,100}$'))).toBe('function');
  });
});

/**
 * The most a refused check may take: a first check two budgets, and a busy machine (whose thread got little CPU) up
 * to two more tries (`checkWithin`), plus the cost of building the answer. A check that were not bounded would take
 * seconds to hours on these values.
 */
const CHECK_BOUND_MS = 4 * SCHEMA_CHECK_TIMEOUT_MS + 250;

describe('skill schemas: every check is bounded in time (a first check may take two budgets: see checkWithin)', () => {
  it('stops a check that would compare every pair (uniqueItems over objects) and says so', () => {
    const schema = { type: 'object', properties: { list: { type: 'array', uniqueItems: true } } };
    const list = Array.from({ length: 60_000 }, (_, i) => ({ i }));
    compileSchema(schema);
    let found: ReturnType<typeof violation>;
    expect(timed(() => (found = violation(schema, { list }, 'input')))).toBeLessThan(CHECK_BOUND_MS);
    expect(found!).toMatchObject({ path: 'input', schemaPath: '#' });
    expect(found!.message).toContain(`within ${SCHEMA_CHECK_TIMEOUT_MS} ms`);
    // The schema still works afterwards, on a value it can check.
    expect(violation(schema, { list: [{ i: 1 }, { i: 1 }] }, 'input')).toMatchObject({ path: 'input.list' });
    expect(violation(schema, { list: [{ i: 1 }, { i: 2 }] }, 'input')).toBeUndefined();
  });

  it('stops nested anyOf that retry the same value down every branch', () => {
    const $defs: Record<string, unknown> = { l30: { type: 'string' } };
    for (let i = 0; i < 30; i++)
      $defs[`l${i}`] = { anyOf: [{ $ref: `#/$defs/l${i + 1}` }, { $ref: `#/$defs/l${i + 1}` }] };
    const schema = { type: 'object', properties: { v: { $ref: '#/$defs/l0' } }, $defs };
    compileSchema(schema);
    let found: ReturnType<typeof violation>;
    expect(timed(() => (found = violation(schema, { v: 1 }, 'input')))).toBeLessThan(CHECK_BOUND_MS);
    expect(found!.message).toContain(`within ${SCHEMA_CHECK_TIMEOUT_MS} ms`);
    expect(violation(schema, { v: 'x' }, 'input')).toBeUndefined();
  });
});

describe('skill schemas: a check held up without costing anything is not refused', () => {
  it('tries again a check that ran out of wall time while the thread slept (a GC pause, a busy machine)', () => {
    const schema = { type: 'object' };
    const pause = new Int32Array(new SharedArrayBuffer(4));
    let calls = 0;
    // Sleeps past the deadline on its first two warm runs (no CPU used), then answers at once.
    const check = (): boolean => {
      calls++;
      if (calls >= 2 && calls <= 3) Atomics.wait(pause, 0, 0, SCHEMA_CHECK_TIMEOUT_MS + 30);
      return true;
    };
    expect(checkWithin(schema, check, {})).toBe(true); // cold, at once
    expect(checkWithin(schema, check, {})).toBe(true); // held up twice, then answered
    expect(calls).toBe(4);
  });

  it('refuses a warm check that spends its budget on the CPU, at once', () => {
    const schema = { type: 'object' };
    let calls = 0;
    const check = (): boolean => {
      calls++;
      if (calls > 1) for (;;); // busy until interrupted
      return true;
    };
    // The thread's CPU clock as a thread alone on its core sees it: the busy loop spends its whole budget. (On a
    // machine this busy, the real clock may show less, and the check would rightly be tried again.)
    let cpuMicros = 0;
    const cpu = jest.spyOn(process, 'threadCpuUsage').mockImplementation(() => {
      cpuMicros += SCHEMA_CHECK_TIMEOUT_MS * 1000;
      return { user: cpuMicros, system: 0 };
    });
    try {
      expect(checkWithin(schema, check, {})).toBe(true);
      expect(timed(() => expect(checkWithin(schema, check, {})).toBeUndefined())).toBeLessThan(
        SCHEMA_CHECK_TIMEOUT_MS * 3,
      );
      expect(calls).toBe(2);
    } finally {
      cpu.mockRestore();
    }
  });
});
