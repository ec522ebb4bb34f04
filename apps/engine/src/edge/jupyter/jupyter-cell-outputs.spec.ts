import { type ActionResult, InvalidInputError, NO_RISK } from '@switchyard/common';
import {
  cellError,
  displayMessages,
  executionCountOf,
  parseException,
  refusedError,
} from './jupyter-cell-outputs';

const result = (fields: Partial<ActionResult>): ActionResult => ({
  id: 'act_1',
  sessionId: 'ses_1',
  type: 'code',
  status: 'succeeded',
  truncated: { stdout: false, stderr: false },
  durationMs: 1,
  startedAt: '2026-01-01T00:00:00.000Z',
  tier: 'pooled',
  risk: NO_RISK,
  ...fields,
});

const PY_TRACEBACK =
  'Traceback (most recent call last):\n  File "<cell 3>", line 2, in <module>\nZeroDivisionError: division by zero\n';

describe('a cell’s answer as Jupyter messages', () => {
  it('turns rich results into display_data and the main one into execute_result, in order', () => {
    const answer = result({
      output: {
        kernel: { executionCount: 7 },
        result: '<Figure>',
        results: [
          { data: { 'text/plain': 'a', 'text/html': '<b>a</b>' } },
          {
            data: { 'text/plain': '<Figure>' },
            metadata: { 'image/png': { width: 640 } },
            files: [{ mimeType: 'image/png', path: '.switchyard/results/x.png', bytes: 9_000_000 }],
            isMainResult: true,
          },
        ],
      },
    });
    expect(executionCountOf(answer)).toBe(7);
    expect(displayMessages(answer, 7)).toEqual([
      {
        msgType: 'display_data',
        content: { data: { 'text/plain': 'a', 'text/html': '<b>a</b>' }, metadata: {}, transient: {} },
      },
      {
        msgType: 'execute_result',
        content: {
          data: { 'text/plain': '<Figure>' },
          metadata: {
            'image/png': { width: 640 },
            switchyard: {
              files: [{ mimeType: 'image/png', path: '.switchyard/results/x.png', bytes: 9_000_000 }],
            },
          },
          execution_count: 7,
        },
      },
    ]);
  });

  it('without rich results, the last expression’s text is the execute_result', () => {
    expect(displayMessages(result({ output: { result: '42' } }), 3)).toEqual([
      {
        msgType: 'execute_result',
        content: { data: { 'text/plain': '42' }, metadata: {}, execution_count: 3 },
      },
    ]);
    expect(displayMessages(result({ output: {} }), 3)).toEqual([]);
    expect(executionCountOf(result({}))).toBeUndefined();
  });

  it('a python exception: its name, message and the traceback on stderr', () => {
    const failed = result({ status: 'failed', exitCode: 1, stderr: `some output\n${PY_TRACEBACK}` });
    expect(cellError(failed, 'python')).toEqual({
      ename: 'ZeroDivisionError',
      evalue: 'division by zero',
      traceback: PY_TRACEBACK.trimEnd().split('\n'),
    });
    expect(cellError(result({}), 'python')).toBeUndefined();
  });

  it('node’s error line, bash’s exit code', () => {
    const node = result({
      status: 'failed',
      stderr: 'ReferenceError: y is not defined\n    at <cell>:1:1\n',
    });
    expect(cellError(node, 'node')).toMatchObject({ ename: 'ReferenceError', evalue: 'y is not defined' });
    const bash = result({ status: 'failed', exitCode: 3, stderr: '' });
    expect(cellError(bash, 'bash')).toEqual({
      ename: 'CellFailed',
      evalue: 'exit code 3',
      traceback: ['CellFailed: exit code 3'],
    });
  });

  it('the engine’s reasons: a refusal, a timeout, an interrupt, a limit', () => {
    const denied = result({
      status: 'denied',
      error: { class: 'policy', code: 'POLICY_DENIED', message: 'denied by session policy: no shell here' },
    });
    expect(cellError(denied, 'bash')).toEqual({
      ename: 'SwitchyardDenied',
      evalue: 'denied by session policy: no shell here',
      traceback: ['SwitchyardDenied: denied by session policy: no shell here'],
    });
    const timedOut = result({
      status: 'timed_out',
      error: { class: 'timeout', message: 'timed out after 30000 ms' },
    });
    expect(cellError(timedOut, 'python')).toMatchObject({ ename: 'SwitchyardTimeout' });
    const interrupted = result({
      status: 'cancelled',
      error: { class: 'cancelled', code: 'KERNEL_INTERRUPTED', message: 'interrupted' },
      stderr: 'Traceback (most recent call last):\n  File "<cell 1>", line 1\nKeyboardInterrupt\n',
    });
    expect(cellError(interrupted, 'python')).toMatchObject({ ename: 'KeyboardInterrupt', evalue: '' });
    const oom = result({
      status: 'failed',
      error: { class: 'limit', code: 'OUT_OF_MEMORY', message: 'out of memory' },
    });
    expect(cellError(oom, 'python')).toMatchObject({ ename: 'SwitchyardLimit', evalue: 'out of memory' });
  });

  it('a request the engine refused before recording it', () => {
    expect(refusedError(new InvalidInputError('code', 'code is too long'))).toEqual({
      ename: 'SwitchyardInvalidInput',
      evalue: 'code is too long',
      traceback: ['SwitchyardInvalidInput: code is too long'],
    });
  });

  it('reads no exception where there is none', () => {
    expect(parseException('plain text\n', 'node')).toBeUndefined();
    expect(parseException('', 'python')).toBeUndefined();
    expect(parseException('Error: x\n', 'bash')).toBeUndefined();
  });
});
