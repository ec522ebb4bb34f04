import type { components } from './generated/schema';
import type { Action } from './types';

type DisplayResult = components['schemas']['DisplayResult'];
type CodeCellOutput = components['schemas']['CodeCellOutput'];

const text = (value: unknown): string | undefined => (typeof value === 'string' ? value : undefined);

/**
 * One rich result of a kernel cell: a Jupyter MIME bundle as the kernel displayed it (a `display()` call, a
 * matplotlib figure, or the cell's final value). The getters read the bundle's MIME types; absent ones are
 * `undefined`.
 */
export class Result {
  /** MIME type → value, as Jupyter carries it. */
  readonly data: Record<string, unknown>;
  readonly metadata: Record<string, unknown>;
  /** The cell's final expression (Jupyter's `execute_result`); the others were displayed. */
  readonly isMainResult: boolean;
  /** Entries too large to inline, written to the workspace instead (`text` then says where). */
  readonly files: NonNullable<DisplayResult['files']>;

  constructor(raw: DisplayResult) {
    this.data = raw.data;
    this.metadata = raw.metadata ?? {};
    this.isMainResult = raw.isMainResult === true;
    this.files = raw.files ?? [];
  }

  /** `text/plain`: every bundle has it. */
  get text(): string | undefined {
    return text(this.data['text/plain']);
  }
  get html(): string | undefined {
    return text(this.data['text/html']);
  }
  get markdown(): string | undefined {
    return text(this.data['text/markdown']);
  }
  get latex(): string | undefined {
    return text(this.data['text/latex']);
  }
  get svg(): string | undefined {
    return text(this.data['image/svg+xml']);
  }
  /** Base64, as the kernel displayed it. */
  get png(): string | undefined {
    return text(this.data['image/png']);
  }
  /** Base64, as the kernel displayed it. */
  get jpeg(): string | undefined {
    return text(this.data['image/jpeg']);
  }
  /** `application/json`: a JSON value. */
  get json(): unknown {
    return this.data['application/json'];
  }
  /** The MIME types it carries. */
  formats(): string[] {
    return Object.keys(this.data);
  }
}

/** Why a cell failed: the engine's error when it gave one, else the exit and the tail of stderr. */
export interface ExecutionError {
  /** `failed`, `timed_out`, `denied`, `error`… */
  status: Action['status'];
  /** The engine's machine code (`RISK_CRITICAL`, `TIMEOUT`…), when it gave one. */
  code?: string;
  message: string;
  /** The traceback or message the program printed. */
  traceback: string;
}

/**
 * What `sbx.runCode()` answers: the cell's rich results, its logs and its error, with the action as the engine
 * recorded it in `action`. A failing cell is an answer, not an exception.
 */
export class Execution {
  /**
   * What the cell displayed, in order, then its final expression's value (`isMainResult`) last: `df.plot()` has its
   * chart at `results[0]` and the `<Axes>` value after it, as in the Python SDK. The engine's own order (Jupyter's:
   * the value comes out before figures still open at the cell's end) is in `action.output.results`.
   */
  readonly results: Result[];
  readonly logs: { stdout: string; stderr: string };
  readonly error: ExecutionError | undefined;

  constructor(readonly action: Action) {
    const cell = isCell(action.output) ? action.output : undefined;
    const results = (cell?.results ?? []).map((r) => new Result(r));
    // Stable: the displayed ones keep their order.
    this.results = [...results.filter((r) => !r.isMainResult), ...results.filter((r) => r.isMainResult)];
    this.logs = { stdout: action.stdout ?? '', stderr: action.stderr ?? '' };
    this.error =
      action.status === 'succeeded'
        ? undefined
        : {
            status: action.status,
            ...(action.error?.code !== undefined && { code: action.error.code }),
            message:
              action.error?.message ??
              (action.exitCode !== undefined ? `exit code ${action.exitCode}` : action.status),
            traceback: action.stderr ?? '',
          };
  }

  /** The cell's final value as text: the main result's `text/plain`, else the kernel's `repr` of it. */
  get text(): string | undefined {
    const main = this.results.find((r) => r.isMainResult);
    if (main?.text !== undefined) return main.text;
    return isCell(this.action.output) ? this.action.output.result : undefined;
  }

  /** The kernel that ran the cell (`state: 'session'`); `undefined` for a fresh run. */
  get kernel(): CodeCellOutput['kernel'] | undefined {
    return isCell(this.action.output) ? this.action.output.kernel : undefined;
  }
}

function isCell(output: Action['output']): output is CodeCellOutput {
  return typeof output === 'object' && output !== null && 'kernel' in output;
}
