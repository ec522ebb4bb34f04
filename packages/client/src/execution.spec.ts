import { Execution, Result } from './execution';
import type { Action } from './types';

const action = (over: Partial<Action>): Action => ({
  id: 'act_1',
  sessionId: 'ses_1',
  type: 'code',
  status: 'succeeded',
  truncated: { stdout: false, stderr: false },
  durationMs: 1,
  startedAt: '2026-01-01T00:00:00.000Z',
  endedAt: '2026-01-01T00:00:00.001Z',
  tier: 'subprocess',
  risk: { score: 0, level: 'low', reasons: [] },
  ...over,
});

const kernel = {
  id: 'krn_1',
  language: 'python',
  tier: 'subprocess',
  executionCount: 1,
  started: false,
} as const;

describe('Execution and Result (runCode answers)', () => {
  it('reads each MIME type of a bundle; absent ones are undefined', () => {
    const r = new Result({
      data: {
        'text/plain': '<Figure>',
        'image/png': 'iVBOR',
        'image/jpeg': '/9j/',
        'image/svg+xml': '<svg/>',
        'text/html': '<b>x</b>',
        'text/markdown': '# x',
        'text/latex': '$x$',
        'application/json': { a: 1 },
      },
      isMainResult: true,
    });
    expect([r.text, r.png, r.jpeg, r.svg, r.html, r.markdown, r.latex]).toEqual([
      '<Figure>',
      'iVBOR',
      '/9j/',
      '<svg/>',
      '<b>x</b>',
      '# x',
      '$x$',
    ]);
    expect(r.json).toEqual({ a: 1 });
    expect(r.isMainResult).toBe(true);
    expect(new Result({ data: { 'text/plain': '1' } }).png).toBeUndefined();
  });

  it("text is the main result's text/plain, else the kernel's repr; logs and kernel from the action", () => {
    const ex = new Execution(
      action({
        stdout: 'out\n',
        output: {
          kernel,
          result: '42',
          results: [
            { data: { 'text/plain': '42' }, isMainResult: true },
            { data: { 'text/plain': 'shown' } },
            { data: { 'text/plain': 'also shown' } },
          ],
        },
      }),
    );
    expect(ex.text).toBe('42');
    // Displays first in their order, the value last (the engine sent the value first, as Jupyter does).
    expect(ex.results.map((r) => r.text)).toEqual(['shown', 'also shown', '42']);
    expect(ex.logs).toEqual({ stdout: 'out\n', stderr: '' });
    expect(ex.kernel?.id).toBe('krn_1');
    expect(ex.error).toBeUndefined();
    expect(new Execution(action({ output: { kernel, result: "'r'" } })).text).toBe("'r'");
    expect(new Execution(action({ stdout: '1\n' })).text).toBeUndefined();
  });

  it('a failed cell is an answer with its error: the engine reason when given, else the exit; traceback = stderr', () => {
    const failed = new Execution(action({ status: 'failed', exitCode: 1, stderr: 'ZeroDivisionError\n' }));
    expect(failed.error).toEqual({
      status: 'failed',
      message: 'exit code 1',
      traceback: 'ZeroDivisionError\n',
    });
    const timedOut = new Execution(
      action({
        status: 'timed_out',
        error: { class: 'timeout', code: 'TIMEOUT', message: 'ran past 100 ms' },
      }),
    );
    expect(timedOut.error).toEqual({
      status: 'timed_out',
      code: 'TIMEOUT',
      message: 'ran past 100 ms',
      traceback: '',
    });
  });
});
