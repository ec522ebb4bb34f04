import type { ActionResult, Language, SwitchyardError } from '@switchyard/common';

/** A rich result of a cell (`output.results[]` of a code action's answer), as far as Jupyter needs it. */
interface DisplayResult {
  data: Record<string, unknown>;
  metadata?: Record<string, unknown>;
  isMainResult?: true;
  files?: Array<{ mimeType: string; path: string; bytes: number }>;
}

/** An IOPub message a cell's answer turns into: `display_data`, or the main result's `execute_result`. */
export interface DisplayMessage {
  msgType: 'display_data' | 'execute_result';
  content: Record<string, unknown>;
}

/** What a failed cell answers in Jupyter's `error` message and its `execute_reply`. */
export interface CellError {
  ename: string;
  evalue: string;
  traceback: string[];
}

/** The most lines of stderr a traceback takes when no Python traceback marks where it starts. */
const MAX_TRACEBACK_LINES = 50;

const isRecord = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

const isDisplayResult = (v: unknown): v is DisplayResult => isRecord(v) && isRecord(v.data);

/** The session kernel's execution count after the cell (`output.kernel.executionCount`), when it ran in one. */
export function executionCountOf(result: ActionResult): number | undefined {
  const output = isRecord(result.output) ? result.output : undefined;
  const kernel = output && isRecord(output.kernel) ? output.kernel : undefined;
  return typeof kernel?.executionCount === 'number' ? kernel.executionCount : undefined;
}

/**
 * What the cell displayed, in the order it did: its rich results (`output.results`), the main one as the
 * `execute_result`; without them (a cell whose answer has none) its `output.result` as text/plain. A MIME entry the
 * engine wrote to the workspace (too big to inline) is named in the bundle's metadata under `switchyard.files`.
 */
export function displayMessages(result: ActionResult, executionCount: number): DisplayMessage[] {
  const output = isRecord(result.output) ? result.output : {};
  if (Array.isArray(output.results)) {
    return output.results.filter(isDisplayResult).map((r) => {
      const metadata = {
        ...(r.metadata ?? {}),
        ...(r.files && r.files.length > 0 && { switchyard: { files: r.files } }),
      };
      return r.isMainResult
        ? { msgType: 'execute_result', content: { data: r.data, metadata, execution_count: executionCount } }
        : { msgType: 'display_data', content: { data: r.data, metadata, transient: {} } };
    });
  }
  if (typeof output.result !== 'string') return [];
  return [
    {
      msgType: 'execute_result',
      content: { data: { 'text/plain': output.result }, metadata: {}, execution_count: executionCount },
    },
  ];
}

/**
 * The error a cell that did not succeed answers: the exception its code raised (python, node), or the engine's
 * reason (`SwitchyardDenied` for a refused cell, `SwitchyardTimeout`, …). The traceback is the one on stderr (the
 * kernel printed it there as it happened), else a line naming the error.
 */
export function cellError(
  result: ActionResult,
  language: Language,
  refusal?: SwitchyardError,
): CellError | undefined {
  if (result.status === 'succeeded') return undefined;
  const stderr = result.stderr ?? '';
  const raised = exceptionOf(result) ?? parseException(stderr, language);
  const reason = refusal?.message ?? result.error?.message;
  const [ename, evalue] = ((): [string, string] => {
    switch (result.status) {
      case 'denied':
        return ['SwitchyardDenied', reason ?? 'the cell was refused'];
      case 'timed_out':
        return ['SwitchyardTimeout', reason ?? 'the cell timed out'];
      case 'cancelled':
        return raised?.name === 'KeyboardInterrupt'
          ? [raised.name, raised.message]
          : ['SwitchyardCancelled', reason ?? 'the cell was cancelled'];
      case 'failed':
        if (result.error)
          return [result.error.class === 'limit' ? 'SwitchyardLimit' : 'SwitchyardError', reason!];
        if (raised) return [raised.name, raised.message];
        return ['CellFailed', `exit code ${result.exitCode ?? 'unknown'}`];
      case 'interrupted':
        return ['SwitchyardInterrupted', reason ?? 'the engine stopped while the cell ran'];
      case 'error':
      case 'running':
      case 'awaiting_approval':
        return ['SwitchyardError', reason ?? `the cell ended ${result.status}`];
    }
  })();
  const traceback = tracebackOf(stderr, language);
  return { ename, evalue, traceback: traceback.length > 0 ? traceback : [`${ename}: ${evalue}`] };
}

/** A request the engine refused before recording it (bad input, a full queue, shutdown): its Jupyter error. */
export function refusedError(err: SwitchyardError): CellError {
  const names: Partial<Record<SwitchyardError['kind'], string>> = {
    invalid_input: 'SwitchyardInvalidInput',
    forbidden: 'SwitchyardDenied',
    rate_limited: 'SwitchyardQueueFull',
    unavailable: 'SwitchyardUnavailable',
  };
  const ename = names[err.kind] ?? 'SwitchyardError';
  return { ename, evalue: err.message, traceback: [`${ename}: ${err.message}`] };
}

/** `output.exception` ({name, message}) when the answer carries it. */
function exceptionOf(result: ActionResult): { name: string; message: string } | undefined {
  const exception = isRecord(result.output) ? result.output.exception : undefined;
  if (!isRecord(exception) || typeof exception.name !== 'string') return undefined;
  return { name: exception.name, message: typeof exception.message === 'string' ? exception.message : '' };
}

/**
 * The exception named on stderr: python's last line (`NameError: name 'x' is not defined`, `KeyboardInterrupt`),
 * node's first error line (`ReferenceError: x is not defined`). Bash raises none.
 */
export function parseException(
  stderr: string,
  language: Language,
): { name: string; message: string } | undefined {
  if (language === 'bash') return undefined;
  const lines = stderr.split('\n').map((l) => l.trimEnd());
  if (language === 'python') {
    const last = lines.findLast((l) => l.length > 0);
    const m = last === undefined ? null : /^([A-Za-z_][\w.]*)(?:: ?(.*))?$/.exec(last);
    return m ? { name: m[1], message: m[2] ?? '' } : undefined;
  }
  for (const line of lines) {
    const m = /^(?:Uncaught )?([A-Za-z_$][\w$.]*(?:Error|Exception)): ?(.*)$/.exec(line);
    if (m) return { name: m[1], message: m[2] };
  }
  return undefined;
}

/** The traceback on stderr: python's from its last `Traceback (most recent call last):`, else stderr's last lines. */
function tracebackOf(stderr: string, language: Language): string[] {
  const lines = stderr.replace(/\n$/, '').split('\n');
  if (lines.length === 1 && lines[0] === '') return [];
  if (language === 'python') {
    const start = lines.findLastIndex((l) => l.startsWith('Traceback (most recent call last):'));
    if (start >= 0) return lines.slice(start);
  }
  return lines.slice(-MAX_TRACEBACK_LINES);
}
