import { compileGlob } from './glob';
import { FileOpError } from './workspace.errors';

const m = (pattern: string, p: string) => compileGlob(pattern, 'pattern')(p);

describe('compileGlob', () => {
  it.each([
    ['*.py', 'a.py', true],
    ['*.py', 'src/a.py', false],
    ['*.py', '.hidden.py', true],
    ['**/*.py', 'a.py', true],
    ['**/*.py', 'x/y/z/a.py', true],
    ['**/*.py', 'x/y/z/a.pyc', false],
    ['src/**', 'src/a/b', true],
    ['src/**', 'src', true],
    ['src/**/test_*.py', 'src/test_a.py', true],
    ['src/**/test_*.py', 'src/a/b/test_a.py', true],
    ['src/**/test_*.py', 'lib/test_a.py', false],
    ['a?c', 'abc', true],
    ['a?c', 'a/c', false],
    ['a?c', 'aéc', true],
    ['*.{js,ts}', 'x.ts', true],
    ['*.{js,ts}', 'x.py', false],
    ['{src,lib}/**/*.{js,t{s,sx}}', 'lib/a/b.tsx', true],
    ['[abc].txt', 'b.txt', true],
    ['[a-c].txt', 'd.txt', false],
    ['[!a-c].txt', 'd.txt', true],
    ['[^a-c].txt', 'a.txt', false],
    ['[]x].txt', '].txt', true],
    ['\\*.txt', '*.txt', true],
    ['\\*.txt', 'a.txt', false],
    ['./src/*.py', 'src/a.py', true],
    ['a**b', 'axxb', true],
    ['a**b', 'ax/xb', false],
  ])('%j against %j is %s', (pattern, p, expected) => {
    expect(m(pattern, p)).toBe(expected);
  });

  it.each(['', '{a,b', 'a}', '[abc', 'a\\', '[z-a]', 'x'.repeat(1001), `${'{a,b}'.repeat(9)}`])(
    'rejects %j as INVALID_PATTERN',
    (pattern) => {
      expect(() => compileGlob(pattern, 'glob')).toThrow(FileOpError);
      try {
        compileGlob(pattern, 'glob');
      } catch (err) {
        expect((err as FileOpError).code).toBe('INVALID_PATTERN');
        expect((err as FileOpError).details.field).toBe('glob');
      }
    },
  );

  it('stays fast on patterns that make regex-based globs backtrack', () => {
    const started = Date.now();
    expect(m(`${'*a'.repeat(30)}b`, 'a'.repeat(250))).toBe(false);
    expect(m('**/**/**/**/**/**/**/x', `${'d/'.repeat(200)}y`)).toBe(false);
    expect(Date.now() - started).toBeLessThan(1000);
  });
});
