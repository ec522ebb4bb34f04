import { answerFor, readToolCall } from './tool-call-formats';

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

  it('names `arguments` when they are not a JSON object, never throwing', () => {
    const invalid = (args: unknown) =>
      readToolCall({ id: 'c', type: 'function', function: { name: 'bash', arguments: args } }, 'c').invalid;
    expect(invalid('{"command": "ls"')).toEqual({
      field: 'arguments',
      message: expect.stringMatching(/^not valid JSON \(.+\)$/),
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
      message: 'nested deeper than 64 levels',
    });
  });

  it('names `type` when it is neither tool_use nor function, and `function` when it is not an object', () => {
    expect(readToolCall({ id: 'x', type: 'function_call', name: 'bash' }, 'x').invalid).toEqual({
      field: 'type',
      message: expect.stringContaining('got "function_call"'),
    });
    expect(readToolCall({ id: 'x', type: 7, name: 'bash' }, 'x').invalid?.message).toContain('got a number');
    expect(readToolCall({ id: 'x', type: 'function', function: 'bash' }, 'x')).toMatchObject({
      format: 'openai',
      invalid: { field: 'function', message: 'must be an object {name, arguments}, not a string' },
    });
  });
});

describe('answerFor', () => {
  const result = { content: '[stdout]\nhi\n\n[exit_code]\n0', is_error: false };

  it('answers a plain call as before: {tool_use_id, content, is_error}', () => {
    expect(answerFor({ id: 't1', format: 'plain' }, result)).toEqual({ tool_use_id: 't1', ...result });
  });

  it('answers a tool_use block with a tool_result block', () => {
    expect(answerFor({ id: 't1', format: 'anthropic' }, result)).toEqual({
      type: 'tool_result',
      tool_use_id: 't1',
      ...result,
    });
  });

  it("answers an OpenAI call with tool_call_id and the role: tool message, holding nothing OpenAI's API refuses", () => {
    const answer = answerFor({ id: 'call_9', format: 'openai' }, { content: 'boom', is_error: true });
    expect(answer).toEqual({
      tool_use_id: 'call_9',
      tool_call_id: 'call_9',
      content: 'boom',
      is_error: true,
      message: { role: 'tool', tool_call_id: 'call_9', content: 'boom' },
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
