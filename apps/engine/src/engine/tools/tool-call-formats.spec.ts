import { RequestValidationError } from '../../platform/validation/request-validation.error';
import { callId, readToolCall } from './tool-call-formats';

describe('readToolCall', () => {
  it('reads {id, name, input} and Anthropic tool_use blocks', () => {
    expect(readToolCall({ id: 't1', name: 'bash', input: { command: 'ls' } }, 't1')).toEqual({
      id: 't1',
      format: 'plain',
      name: 'bash',
      input: { command: 'ls' },
    });
    expect(readToolCall({ type: 'tool_use', id: 't2', name: 'read', input: { path: 'a' } }, 't2')).toEqual({
      id: 't2',
      format: 'anthropic',
      name: 'read',
      input: { path: 'a' },
    });
  });

  it('reads OpenAI tool calls with arguments as a JSON string or an object', () => {
    const call = (args: unknown) =>
      readToolCall({ id: 'call_1', type: 'function', function: { name: 'bash', arguments: args } }, 'call_1');
    expect(call('{"command":"echo hi","timeoutMs":null}')).toEqual({
      id: 'call_1',
      format: 'openai',
      name: 'bash',
      input: { command: 'echo hi', timeoutMs: null },
    });
    expect(call({ command: 'ls' })).toEqual({
      id: 'call_1',
      format: 'openai',
      name: 'bash',
      input: { command: 'ls' },
    });
    // No arguments at all: the tool gets no input (a tool without fields, or an input error naming the field).
    for (const none of ['', '  ', 'null', null, undefined]) {
      expect(call(none)).toMatchObject({ format: 'openai', name: 'bash', input: undefined });
      expect(call(none).invalid).toBeUndefined();
    }
    // A client that dropped `type` still sent `function`.
    expect(readToolCall({ id: 'c', function: { name: 'ls', arguments: '{}' } }, 'c')).toMatchObject({
      format: 'openai',
      name: 'ls',
      input: {},
    });
  });

  it('reads OpenAI Responses API function_call items, answered by their call_id', () => {
    const item = {
      type: 'function_call',
      id: 'fc_1',
      call_id: 'call_1',
      name: 'bash',
      arguments: '{"command":"ls"}',
      status: 'completed',
    };
    expect(callId(item, '')).toBe('call_1');
    expect(readToolCall(item, 'call_1')).toEqual({
      id: 'call_1',
      format: 'responses',
      name: 'bash',
      input: { command: 'ls' },
    });
    expect(readToolCall({ ...item, arguments: '{' }, 'call_1').invalid).toMatchObject({ field: 'arguments' });
    // Without a call_id there is no function call to answer: its id answers, and the result says so.
    const { call_id: _, ...noCallId } = item;
    expect(callId(noCallId, '')).toBe('fc_1');
    expect(readToolCall(noCallId, 'fc_1').invalid).toEqual({
      field: 'call_id',
      message: 'must be a non-empty string: the function call it answers',
    });
  });

  it('takes the id from id (call_id for a function_call item), else refuses the call with a 400 naming it', () => {
    expect(callId({ id: 'toolu_1', type: 'tool_use' }, '')).toBe('toolu_1');
    // call_id is the Responses API's: any other call is answered by its id.
    expect(callId({ id: 'x', call_id: 'y', type: 'function' }, '')).toBe('x');
    const refused = (call: unknown, at: string) => {
      try {
        callId(call, at);
      } catch (err) {
        return (err as RequestValidationError).problems.map((p) => p.field);
      }
      return [];
    };
    expect(refused({ name: 'bash' }, '')).toEqual(['id']);
    expect(refused({ id: '' }, '[2]')).toEqual(['[2].id']);
    expect(refused('call', '')).toEqual(['id']);
    expect(refused({ type: 'function_call', call_id: '', name: 'bash' }, '[0]')).toEqual(['[0].call_id']);
  });

  it('names `arguments` when they are not a JSON object, never throwing', () => {
    const invalid = (args: unknown) =>
      readToolCall({ id: 'c', type: 'function', function: { name: 'bash', arguments: args } }, 'c').invalid;
    expect(invalid('{"command": "ls"')).toEqual({
      field: 'arguments',
      message: expect.stringMatching(/^is malformed JSON: .+$/),
    });
    expect(invalid('[1, 2]')).toEqual({ field: 'arguments', message: 'must be a JSON object, not an array' });
    expect(invalid('"ls"')).toEqual({ field: 'arguments', message: 'must be a JSON object, not a string' });
    expect(invalid(42)).toEqual({
      field: 'arguments',
      message: 'must be a string of JSON (or an object), not a number',
    });
    expect(invalid(['ls'])).toMatchObject({ field: 'arguments' });
    expect(invalid('{"env": {"__proto__": {"x": 1}}}')).toEqual({
      field: 'arguments',
      message: 'env.__proto__: the key "__proto__" is not allowed anywhere in a request',
    });
    expect(invalid('{"a":'.repeat(100) + '1' + '}'.repeat(100))).toEqual({
      field: 'arguments',
      message: 'nests arrays and objects deeper than 64 levels',
    });
  });

  it('names `type` when it is none of the shapes, and `function` when it is not an object', () => {
    expect(readToolCall({ id: 'x', type: 'tool_call', name: 'bash' }, 'x').invalid).toEqual({
      field: 'type',
      message: expect.stringContaining('got "tool_call"'),
    });
    expect(readToolCall({ id: 'x', type: 7, name: 'bash' }, 'x').invalid?.message).toContain('got a number');
    expect(readToolCall({ id: 'x', type: 'function', function: 'bash' }, 'x')).toMatchObject({
      format: 'openai',
      invalid: { field: 'function', message: 'must be an object {name, arguments}, not a string' },
    });
  });
});

describe('OpenAI arguments bounded before parsing', () => {
  it('refuses an arguments string of more values than a body may hold, naming the field, without parsing it', () => {
    const args = `[${'0,'.repeat(150_000)}0]`;
    expect(readToolCall({ id: 'c', function: { name: 'bash', arguments: args } }, 'c')).toMatchObject({
      invalid: { field: 'arguments', message: expect.stringContaining('more than') },
    });
  });
});
