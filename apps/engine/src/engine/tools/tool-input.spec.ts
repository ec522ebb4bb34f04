import { buildToolCatalog, type ToolDefinition } from './tool-catalog';
import { readToolInput, withoutAbsentNulls } from './tool-input';

const catalog = buildToolCatalog();
const tool = (name: string): ToolDefinition => catalog.find((t) => t.name === name)!;

describe('readToolInput', () => {
  it('reads absent or null input as {} and a null field as absent', () => {
    expect(readToolInput(tool('ls'), undefined)).toEqual({ input: {} });
    expect(readToolInput(tool('ls'), null)).toEqual({ input: {} });
    expect(readToolInput(tool('bash'), { command: 'ls', timeoutMs: null, state: null })).toEqual({
      input: { command: 'ls' },
    });
  });

  it('refuses a non-object input and fields the tool does not take, naming them', () => {
    expect(readToolInput(tool('bash'), 'ls')).toEqual({
      error: 'input must be a JSON object with the fields of bash: command, timeoutMs, state',
    });
    expect(readToolInput(tool('bash'), { command: 'ls', code: 'x', verbose: null })).toEqual({
      error: 'invalid input for bash: unknown field code; bash takes command, timeoutMs, state',
    });
  });

  it('takes a map field as an object or as {name, value} pairs (its strict-mode form)', () => {
    const start = tool('process_start');
    expect(readToolInput(start, { command: 'x', env: { A: '1' } })).toEqual({
      input: { command: 'x', env: { A: '1' } },
    });
    expect(
      readToolInput(start, {
        command: 'x',
        env: [
          { name: 'A', value: '1' },
          { name: 'B', value: '2' },
        ],
      }),
    ).toEqual({ input: { command: 'x', env: { A: '1', B: '2' } } });
    expect(readToolInput(start, { command: 'x', env: [] })).toEqual({ input: { command: 'x', env: {} } });
  });

  it('names the pair at fault in a malformed list', () => {
    const start = tool('process_start');
    const error = (env: unknown): string | undefined => {
      const r = readToolInput(start, { command: 'x', env });
      return 'error' in r ? r.error : undefined;
    };
    expect(error([{ name: 'A', value: '1' }, 'B=2'])).toBe(
      'invalid input for process_start: env[1]: must be an object {name, value} with a string name',
    );
    expect(error([{ name: 'A', value: '1', extra: true }])).toBe(
      'invalid input for process_start: env[0]: unknown field extra',
    );
    expect(
      error([
        { name: 'A', value: '1' },
        { name: 'A', value: '2' },
      ]),
    ).toBe('invalid input for process_start: env[1].name: "A" is given twice');
    expect(error([{ name: '__proto__', value: '1' }])).toBe(
      'invalid input for process_start: env[0].name: the key "__proto__" is not allowed anywhere in a request',
    );
    // Only map fields take pairs: a list elsewhere is left for validation to refuse.
    expect(readToolInput(tool('bash'), { command: [{ name: 'a', value: 'b' }] })).toEqual({
      input: { command: [{ name: 'a', value: 'b' }] },
    });
  });
});

describe('withoutAbsentNulls', () => {
  const closed = (properties: Record<string, unknown>) => ({
    type: 'object',
    properties,
    additionalProperties: false,
  });
  it('drops a null where the field’s schema does not take null, at any depth, and keeps one it takes', () => {
    const schema = closed({
      a: { type: 'string' },
      keep: { type: ['string', 'null'] },
      inner: closed({ n: { type: 'integer' }, m: { type: 'integer' } }),
      list: { type: 'array', items: closed({ x: { type: 'string' } }) },
    });
    expect(
      withoutAbsentNulls(schema, {
        a: null,
        keep: null,
        inner: { n: null, m: 1 },
        list: [{ x: null }, { x: 'y' }],
        other: null,
      }),
    ).toEqual({ keep: null, inner: { m: 1 }, list: [{}, { x: 'y' }], other: null });
  });
});
