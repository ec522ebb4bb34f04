import { IsInt, IsObject, IsOptional, IsString, Min } from 'class-validator';
import { FileReadDto } from '../../engine/actions/dto/file-action.dto';
import { CreatePlanDto } from '../plans/dto/plan.dto';
import { CreateSessionDto } from '../sessions/dto/create-session.dto';
import { RequestValidationError } from '../../platform/validation/request-validation.error';
import { validateDto } from '../../platform/validation/validate-dto';

class ProbeDto {
  @IsString()
  name!: string;

  @IsOptional()
  @IsInt()
  @Min(1)
  count?: number;

  @IsOptional()
  @IsObject()
  labels?: Record<string, unknown>;
}

const problems = (cls: new () => object, value: unknown, prefix?: string) => {
  try {
    validateDto(cls, value, prefix);
  } catch (e) {
    if (e instanceof RequestValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a validation error');
};

describe('validateDto and null', () => {
  it('treats an optional field sent as null as absent', () => {
    const dto = validateDto(ProbeDto, { name: 'a', count: null, labels: null });
    expect(dto).toBeInstanceOf(ProbeDto);
    expect(dto.name).toBe('a');
    expect(dto.count).toBeUndefined();
    expect(dto.labels).toBeUndefined();
    expect(Object.entries(dto).filter(([, v]) => v === null)).toEqual([]);
  });

  it('reports a required field sent as null as missing, naming it', () => {
    const p = problems(ProbeDto, { name: null, count: 2 });
    expect(p.map((x) => x.field)).toEqual(['name']);
    expect(p[0].message).toContain('string');
  });

  it('prefixes the fields it names', () => {
    expect(problems(ProbeDto, { name: null }, 'steps[0].action').map((x) => x.field)).toEqual([
      'steps[0].action.name',
    ]);
  });

  it('still validates a present value next to a null one', () => {
    expect(problems(ProbeDto, { name: 'a', count: null, labels: 'x' }).map((x) => x.field)).toEqual([
      'labels',
    ]);
    expect(problems(ProbeDto, { name: 'a', count: 0, labels: null }).map((x) => x.field)).toEqual(['count']);
  });

  it('keeps nulls inside a free-form value: only top-level fields mean absent', () => {
    const dto = validateDto(CreateSessionDto, { metadata: { owner: null, tags: [null] } });
    expect(dto.metadata).toEqual({ owner: null, tags: [null] });
  });

  it('applies to the real DTOs: a file read with offset and limit null reads from the start', () => {
    const dto = validateDto(FileReadDto, {
      type: 'file',
      op: 'read',
      path: 'a.txt',
      offset: null,
      limit: null,
    });
    expect(dto.offset).toBeUndefined();
    expect(dto.limit).toBeUndefined();
    expect(problems(FileReadDto, { type: 'file', op: 'read', path: null }).map((x) => x.field)).toEqual([
      'path',
    ]);
    const session = validateDto(CreateSessionDto, {
      metadata: null,
      ttlSeconds: null,
      maxConcurrentActions: null,
    });
    expect(session.metadata).toBeUndefined();
    expect(session.ttlSeconds).toBeUndefined();
  });

  it('refuses a body that is not an object, null itself included', () => {
    for (const value of [null, undefined, [], [null], 'x', 1, true]) {
      expect(problems(ProbeDto, value)).toEqual([{ field: 'body', message: 'must be a JSON object' }]);
    }
    expect(problems(ProbeDto, null, 'steps[2].retry')[0].field).toBe('steps[2].retry');
  });

  it('refuses an unknown field whatever its value, null included (null is absent only for fields it has)', () => {
    expect(problems(ProbeDto, { name: 'a', extra: null, '': null })).toEqual([
      { field: 'extra', message: 'unknown field' },
      { field: '', message: 'unknown field' },
    ]);
    expect(problems(ProbeDto, { name: 'a', extra: 0 })).toEqual([
      { field: 'extra', message: 'unknown field' },
    ]);
  });
});

describe('validateDto and keys that reach object internals', () => {
  it('refuses them as fields, naming each (query objects reach it without the body checks)', () => {
    const query = Object.assign(Object.create(null) as Record<string, unknown>, {
      name: 'a',
      constructor: '1',
      ['__proto__']: 'x',
      prototype: 'y',
    });
    const p = problems(ProbeDto, query);
    expect(p.map((x) => x.field).sort()).toEqual(['__proto__', 'constructor', 'prototype']);
    expect(p[0].message).toContain('not allowed');
    expect(problems(ProbeDto, { name: 'a', constructor: null }, 'steps[0]').map((x) => x.field)).toEqual([
      'steps[0].constructor',
    ]);
  });
});

describe('validateDto field names', () => {
  it('names nested array elements with brackets, as plan validation names them', () => {
    const p = problems(CreatePlanDto, {
      steps: [
        { id: 'a', action: {} },
        { id: 'b', action: {}, retry: { attempts: 'x', backoffMs: null }, extra: 1 },
      ],
    });
    expect(p.map((x) => x.field).sort()).toEqual(['steps[1].extra', 'steps[1].retry.attempts']);
    expect(validateDto(CreatePlanDto, { steps: [{ id: 'a', action: {} }] }).steps).toHaveLength(1);
  });
});
