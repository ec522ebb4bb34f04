import * as os from 'node:os';

const SIGNAL_NAMES = new Map(Object.entries(os.constants.signals).map(([name, num]) => [num, name]));

/** The exit status a shell (and bubblewrap, and Docker) reports for a process killed by `signal`: 128 + n. */
export const signalExit = (signal: 'SIGKILL' | 'SIGXCPU' | 'SIGXFSZ'): number =>
  128 + os.constants.signals[signal];

/** The signal an exit status above 128 stands for, e.g. `SIGKILL` for 137; `undefined` for ordinary exits. */
export function signalOfExit(exitCode: number): string | undefined {
  return exitCode > 128 ? SIGNAL_NAMES.get(exitCode - 128) : undefined;
}
