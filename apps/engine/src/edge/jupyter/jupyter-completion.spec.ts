import { codePointLength, complete, isComplete } from './jupyter-completion';

describe('completion and is_complete, answered without the kernel', () => {
  it('completes the name before the cursor from the language’s words and the cell’s own names', () => {
    const code = 'import math\nmy_total = 3\nmy_t';
    expect(complete('python', code, code.length)).toEqual({
      matches: ['my_total'],
      cursor_start: code.length - 4,
      cursor_end: code.length,
    });
    expect(complete('python', 'pri', 3).matches).toContain('print');
    expect(complete('node', 'cons', 4).matches).toEqual(['console', 'const']);
    expect(complete('bash', 'ec', 2).matches).toEqual(['echo']);
  });

  it('after a dot, offers the names the cell uses after a dot', () => {
    const code = 'df.describe()\ndf.head()\nprint(df.de';
    expect(complete('python', code, code.length).matches).toEqual(['describe']);
  });

  it('counts the cursor in code points, as protocol 5.2 does', () => {
    const code = '"🙂"; alpha = 1; al';
    expect(codePointLength(code)).toBe(code.length - 1);
    const cursor = codePointLength(code);
    expect(complete('python', code, cursor)).toMatchObject({
      matches: ['all', 'alpha'],
      cursor_start: cursor - 2,
      cursor_end: cursor,
    });
  });

  it('says whether python needs more lines', () => {
    expect(isComplete('python', 'x = 1')).toEqual({ status: 'complete' });
    expect(isComplete('python', 'for i in range(3):')).toEqual({ status: 'incomplete', indent: '    ' });
    expect(isComplete('python', 'f(1,\n  2')).toEqual({ status: 'incomplete', indent: '' });
    expect(isComplete('python', 's = """open')).toEqual({ status: 'incomplete', indent: '' });
    expect(isComplete('python', 'x = ")" # (')).toEqual({ status: 'complete' });
    expect(isComplete('python', 'x = 1)')).toEqual({ status: 'invalid' });
    expect(isComplete('node', 'function f() {')).toEqual({ status: 'unknown' });
  });
});
