/**
 * A minimal valid input per non-browser tool (browser tools need a page: see `browserSteps` in tools.e2e-spec.ts).
 * The tools run in `TOOL_ORDER`, where each finds what it needs (the file to read, the process to signal).
 */
export const MINIMAL_INPUTS: Record<string, Record<string, unknown>> = {
  bash: { command: 'echo hi' },
  python: { code: 'print(2 + 2)' },
  node: { code: 'console.log(6 * 7)' },
  write: { path: 'notes.txt', content: 'alpha\nbeta\n' },
  read: { path: 'notes.txt' },
  edit: { path: 'notes.txt', find: 'beta', replace: 'gamma' },
  ls: {},
  find: { pattern: '*.txt' },
  grep: { pattern: 'gamma' },
  process_start: { command: 'cat', name: 'echo' },
  process_list: {},
  process_write: { processId: 'echo', data: 'hello\n' },
  process_logs: { processId: 'echo' },
  process_signal: { processId: 'echo', signal: 'HUP' },
  process_wait: { processId: 'echo', timeoutMs: 5000 },
  process_stop: { processId: 'echo' },
  kernel_restart: { language: 'python' },
};

export const TOOL_ORDER = [
  'bash',
  'python',
  'node',
  'write',
  'read',
  'edit',
  'ls',
  'find',
  'grep',
  'process_start',
  'process_list',
  'process_write',
  'process_logs',
  'process_signal',
  'process_wait',
  'process_stop',
  'kernel_restart',
];
