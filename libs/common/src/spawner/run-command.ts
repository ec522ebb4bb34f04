import { sharedSpawner } from './spawner';

export interface RunCommandOptions {
  /** The complete environment (default: a PATH of the system directories only). */
  env?: Record<string, string>;
  cwd?: string;
  /** Killed (its whole process group) past this; default 60 s. */
  timeoutMs?: number;
}

/** A command that failed: its exit (or the reason it did not start) and what it printed. */
export class CommandError extends Error {
  constructor(
    message: string,
    readonly stdout: string,
    readonly stderr: string,
    readonly exitCode: number | null,
    options?: ErrorOptions,
  ) {
    super(message, options);
  }
}

/** What a command may print that is kept, per stream; the rest is dropped. */
const KEEP_BYTES = 1 << 20;
const SYSTEM_PATH = '/usr/sbin:/usr/bin:/sbin:/bin';

/**
 * Runs `command` through the process's spawner (no fork of the caller: see `Spawner`) and resolves with what it
 * printed once it exits 0; rejects with a `CommandError` (its stderr included) otherwise. `execFile`'s contract, for
 * the engine's host commands (mount, mkfs, losetup…), without holding the event loop for the fork.
 */
export function runCommand(
  command: string,
  args: string[],
  options: RunCommandOptions = {},
): Promise<{ stdout: string; stderr: string }> {
  const proc = sharedSpawner().launch({
    command,
    args,
    env: options.env ?? { PATH: SYSTEM_PATH },
    cwd: options.cwd ?? '/',
  });
  const out = { stdout: '', stderr: '' };
  for (const name of ['stdout', 'stderr'] as const) {
    proc[name].on('data', (chunk: Buffer) => {
      if (out[name].length < KEEP_BYTES) out[name] += chunk.toString('utf8');
    });
    proc[name].on('error', () => undefined);
  }
  proc.status.resume();
  for (const w of [proc.stdin, proc.control]) {
    w.on('error', () => undefined);
    w.end();
  }
  const timeoutMs = options.timeoutMs ?? 60_000;
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
    proc.killGroup();
  }, timeoutMs);
  return proc.closed.then((exit) => {
    clearTimeout(timer);
    if (exit.code === 0) return out;
    const what = `${command} ${args.join(' ')}`;
    const why = exit.error
      ? exit.error.message
      : timedOut
        ? `timed out after ${timeoutMs} ms`
        : exit.signal
          ? `killed by ${exit.signal}`
          : `exit code ${exit.code}`;
    throw new CommandError(`Command failed: ${what}: ${why}`, out.stdout, out.stderr, exit.code, {
      cause: exit.error,
    });
  });
}
