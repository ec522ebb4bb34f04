import { plainToInstance } from 'class-transformer';
import { CreatePlanDto, MAX_STEPS } from '../plans/dto/plan.dto';
import { PolicyDto } from '../policies/dto/policy.dto';
import { CreateSessionDto } from '../sessions/dto/create-session.dto';
import { MAX_DTO_KEYS, MAX_UNKNOWN_FIELDS, oversizeProblems } from '../../platform/validation/dto-bounds';
import { toInstance } from '../../platform/validation/dto-transform';
import { RequestValidationError } from '../../platform/validation/request-validation.error';
import { validateDto } from '../../platform/validation/validate-dto';

/** Milliseconds `fn` takes. */
const timed = (fn: () => unknown): number => {
  const start = performance.now();
  fn();
  return performance.now() - start;
};

const problemsOf = (fn: () => unknown) => {
  try {
    fn();
  } catch (e) {
    if (e instanceof RequestValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a validation error');
};

const wide = (n: number): Record<string, number> =>
  Object.fromEntries(Array.from({ length: n }, (_, i) => [`k${i}`, i]));

describe('toInstance', () => {
  it('builds what plainToInstance builds: nested DTOs as their classes, free-form data as it is', () => {
    const body = {
      metadata: { a: [1, { b: 'c' }], d: null },
      policy: { rules: [{ effect: 'deny', match: { tool: 'python' } }] },
      network: { allow: ['pypi.org'] },
      ttlSeconds: 60,
    };
    const ours = toInstance(CreateSessionDto, body);
    const theirs = plainToInstance(CreateSessionDto, body, { enableImplicitConversion: false });
    expect(ours).toEqual(theirs);
    expect(ours).toBeInstanceOf(CreateSessionDto);
    expect(ours.policy).toBeInstanceOf(PolicyDto);
    expect(ours.policy!.constructor).toBe(theirs.policy!.constructor);
    // Free-form data is kept as parsed: the body is the request's own.
    expect(ours.metadata).toBe(body.metadata);
    const plan = { steps: [{ id: 'a', action: { type: 'code', code: '1' }, dependsOn: [] }] };
    expect(toInstance(CreatePlanDto, plan)).toEqual(plainToInstance(CreatePlanDto, plan));
  });

  it('takes linear time in the keys of an object (class-transformer’s quadratic copy took 3 s for 50 000)', () => {
    // Four times the keys: about four times the time when linear, sixteen when quadratic (as it was). The best of
    // three runs of each, so that a busy machine does not decide.
    const best = (n: number): number => {
      // Keys of an object to become a DTO: each is looked up in the class's metadata, then copied.
      const body = wide(n);
      return Math.min(...[0, 1, 2].map(() => timed(() => toInstance(CreateSessionDto, body))));
    };
    best(1000);
    expect(best(40_000) / best(10_000)).toBeLessThan(9);
  });
});

describe('oversizeProblems', () => {
  it('refuses an array over its @ArrayMaxSize before anything validates its elements', () => {
    const steps = Array.from({ length: 50_000 }, () => ({}));
    let problems: ReturnType<typeof problemsOf> = [];
    expect(timed(() => (problems = problemsOf(() => validateDto(CreatePlanDto, { steps }))))).toBeLessThan(
      100,
    );
    expect(problems).toEqual([
      { field: 'steps', message: `must contain no more than ${MAX_STEPS} elements` },
    ]);
    // In nested DTOs too, named by their path.
    const rules = Array.from({ length: 10_000 }, () => ({ effect: 'deny' }));
    expect(problemsOf(() => validateDto(CreateSessionDto, { policy: { rules } }))).toEqual([
      { field: 'policy.rules', message: 'must contain no more than 100 elements' },
    ]);
    expect(oversizeProblems(CreateSessionDto, { network: { allow: Array(65).fill('a') } })).toEqual([
      { field: 'network.allow', message: 'must contain no more than 64 elements' },
    ]);
  });

  it('refuses an object of more keys than any DTO has fields, as a whole', () => {
    expect(oversizeProblems(CreateSessionDto, wide(MAX_DTO_KEYS + 1))).toEqual([
      { field: 'body', message: `has ${MAX_DTO_KEYS + 1} fields; at most ${MAX_DTO_KEYS} are read` },
    ]);
    expect(oversizeProblems(CreatePlanDto, { steps: [{ id: 'a', action: {} }, wide(300)] })).toEqual([
      { field: 'steps[1]', message: `has 300 fields; at most ${MAX_DTO_KEYS} are read` },
    ]);
  });

  it('reports at most MAX_UNKNOWN_FIELDS unknown fields, without validating the rest', () => {
    const steps = Array.from({ length: MAX_STEPS }, (_, i) => ({ id: `s${i}`, action: {}, ...wide(250) }));
    let problems: ReturnType<typeof problemsOf> = [];
    expect(timed(() => (problems = problemsOf(() => validateDto(CreatePlanDto, { steps }))))).toBeLessThan(
      100,
    );
    expect(problems).toHaveLength(MAX_UNKNOWN_FIELDS);
    expect(problems[0]).toEqual({ field: 'steps[0].k0', message: 'unknown field' });
    // A few unknown fields are left to class-validator, which reports them with everything else.
    expect(oversizeProblems(CreateSessionDto, { ttlSeconds: 1, nope: 1 })).toEqual([]);
    expect(
      problemsOf(() => validateDto(CreateSessionDto, { ttlSeconds: 0, nope: 1 }))
        .map((p) => p.field)
        .sort(),
    ).toEqual(['nope', 'ttlSeconds']);
  });
});
