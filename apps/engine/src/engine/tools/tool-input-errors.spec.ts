import { inToolTerms, toolProblem } from './tool-input-errors';

const bash = { renames: { code: 'command' }, fields: ['command', 'timeoutMs', 'state'] };
const python = { renames: { code: 'code' }, fields: ['code', 'timeoutMs', 'state'] };
const waitFor = { renames: {}, fields: ['selector', 'state', 'text', 'url', 'loadState', 'timeoutMs'] };

describe('toolProblem', () => {
  it("names the tool's field, in the prefix and in the message", () => {
    expect(toolProblem(bash, 'code', 'code must be a string')).toBe('command: command must be a string');
    expect(toolProblem(bash, 'code', 'code contains a NUL byte; code is 9 bytes; at most 8')).toBe(
      'command: command contains a NUL byte; command is 9 bytes; at most 8',
    );
    expect(toolProblem(python, 'code', 'code must be a string')).toBe('code: code must be a string');
    expect(toolProblem(bash, 'timeoutMs', 'timeoutMs must be an integer')).toBe(
      'timeoutMs: timeoutMs must be an integer',
    );
  });

  it('keeps nested paths under the renamed field', () => {
    expect(toolProblem({ renames: { env: 'variables' }, fields: ['variables'] }, 'env.LD_X', 'denied')).toBe(
      'variables.LD_X: denied',
    );
    expect(toolProblem({ renames: {}, fields: ['values'] }, 'values[0]', 'must be a string')).toBe(
      'values[0]: must be a string',
    );
  });

  it('names no field for one the tool sets itself (type, op, language)', () => {
    expect(toolProblem(waitFor, 'op', 'wait_for needs exactly one of selector, text, url, loadState')).toBe(
      'wait_for needs exactly one of selector, text, url, loadState',
    );
    expect(toolProblem(bash, 'language', 'language must be one of python, node, bash')).toBe(
      'language must be one of python, node, bash',
    );
    expect(toolProblem(bash, undefined, 'code refused')).toBe('command refused');
    expect(toolProblem(bash, 'constructor', 'x')).toBe('x');
  });

  it('leaves words that only contain the internal name alone', () => {
    expect(inToolTerms(bash, 'exit code 3; codes differ; code must be a string')).toBe(
      'exit code 3; codes differ; command must be a string',
    );
  });
});
