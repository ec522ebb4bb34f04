import type { Readable, Writable } from 'node:stream';

/** What to start: one process in a process group of its own, with pipes on fds 0–4. */
export interface LaunchSpec {
  command: string;
  args: string[];
  /** The complete environment; nothing is inherited from the engine. */
  env: Record<string, string>;
  cwd: string;
  /** Host uid/gid to run as (the engine must be root to switch); default: the engine's. */
  uid?: number;
  gid?: number;
}

export interface ProcessExit {
  /** Exit code, or null when killed by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  /** Set when the process could not be started at all (e.g. ENOENT). */
  error?: Error;
}

/**
 * A started process with its own process group, with pipes on fds 0–4. The streams are usable at once; what is
 * written before the process runs reaches it once it does.
 */
export interface LaunchedProcess {
  /** Its pid once known (`started` has resolved); undefined before, or when it could not be started. */
  readonly pid: number | undefined;
  /** Resolves with the pid once the process runs, or undefined when it could not be started (`closed` says why). */
  readonly started: Promise<number | undefined>;
  readonly stdin: Writable;
  readonly stdout: Readable;
  readonly stderr: Readable;
  /** fd 3, read by the engine (bubblewrap's `--json-status-fd`). */
  readonly status: Readable;
  /** fd 4, written by the engine (bubblewrap's `--args`). */
  readonly control: Writable;
  /** Resolves once the process has exited and every stdio stream is closed. Never rejects. */
  readonly closed: Promise<ProcessExit>;
  /** SIGKILLs the whole process group. Safe to call repeatedly and after exit. */
  killGroup(): void;
}
