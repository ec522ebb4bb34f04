import type { GrepOp } from '../file-op.types';
import { expectFileOpError, useFileOpsFixture } from './file-ops.testing';

/** `grep` (`FileSearch`), through `FileOperations.execute`. */
describe('FileOperations: search', () => {
  const f = useFileOpsFixture();
  const { run, put } = f;

  describe('grep', () => {
    beforeEach(async () => {
      await put('a.py', 'import os\nprint("hello")\n');
      await put('src/b.py', 'def Hello():\n    return 1\r\n');
      await put('src/c.ts', 'const hello = 1;\n');
      await put('bin.dat', Buffer.from('hello\0world'));
    });
    const grep = async (pattern: string, extra: Partial<GrepOp> = {}) =>
      (await run({ op: 'grep', pattern, ...extra })).output;

    it('returns path:line:text, skipping binary files', async () => {
      const out = await run({ op: 'grep', pattern: 'hello' });
      expect(out.output).toEqual({
        matches: ['a.py:2:print("hello")', 'src/c.ts:1:const hello = 1;'],
        truncated: false,
      });
      expect(out.touched).toEqual([
        { path: 'a.py', access: 'read' },
        { path: 'src/c.ts', access: 'read' },
      ]);
    });

    it('supports ignoreCase, a name glob, a path glob, a sub path and a single file', async () => {
      expect((await grep('hello', { ignoreCase: true, glob: '*.py' })).matches).toEqual([
        'a.py:2:print("hello")',
        'src/b.py:1:def Hello():',
      ]);
      expect((await grep('.', { glob: 'src/*.ts' })).matches).toEqual(['src/c.ts:1:const hello = 1;']);
      expect((await grep('return', { path: 'src' })).matches).toEqual(['src/b.py:2:    return 1']);
      expect((await grep('^import', { path: 'a.py' })).matches).toEqual(['a.py:1:import os']);
    });

    it('caps matches and line text', async () => {
      await put('long.txt', `${'x'.repeat(2000)}\n`.repeat(5));
      const out = await grep('x', { limit: 3 });
      expect(out.truncated).toBe(true);
      expect(out.matches).toHaveLength(3);
      expect((out.matches as string[])[0]).toBe(`long.txt:1:${'x'.repeat(500)}`);
    });

    it('skips files over the cap', async () => {
      f.configure({ limits: { maxFileBytes: 30 } });
      await put('big.txt', `hello ${'y'.repeat(50)}`);
      expect((await grep('hello')).matches).toEqual(['a.py:2:print("hello")', 'src/c.ts:1:const hello = 1;']);
    });

    it('rejects invalid and over-long patterns, and stops catastrophic backtracking', async () => {
      await expectFileOpError(run({ op: 'grep', pattern: '(' }), 'INVALID_PATTERN');
      await expectFileOpError(run({ op: 'grep', pattern: 'a'.repeat(1001) }), 'INVALID_PATTERN');
      await put('redos.txt', `${'a'.repeat(40)}!\n`);
      f.configure({ grepFileTimeoutMs: 100 });
      const started = Date.now();
      const err = await expectFileOpError(
        run({ op: 'grep', pattern: '^(a+)+$', path: 'redos.txt' }),
        'INVALID_PATTERN',
      );
      expect(err.message).toMatch(/catastrophic backtracking/);
      expect(Date.now() - started).toBeLessThan(2000);
    });

    it('matches off the event loop: a backtracking pattern holds its grep, never the timers of everything else', async () => {
      await put('redos.txt', `${'a'.repeat(40)}!\n`);
      f.configure({ grepFileTimeoutMs: 1000 });
      // A tick every 10 ms while the grep backtracks for its whole second: the longest gap between ticks is the
      // longest time the event loop was held.
      let last = Date.now();
      let longest = 0;
      const ticker = setInterval(() => {
        const now = Date.now();
        longest = Math.max(longest, now - last);
        last = now;
      }, 10);
      try {
        await expectFileOpError(
          run({ op: 'grep', pattern: '^(a+)+$', path: 'redos.txt' }),
          'INVALID_PATTERN',
        );
      } finally {
        clearInterval(ticker);
      }
      expect(longest).toBeLessThan(100);
      // The next grep still works (a fresh worker replaces the one that was stopped).
      await put('ok.txt', 'find me\n');
      expect((await run({ op: 'grep', pattern: 'find', path: 'ok.txt' })).output.matches).toEqual([
        'ok.txt:1:find me',
      ]);
    });
  });
});
