import { spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import { reapOrphanedSandboxes } from './orphan-reaper';

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

/** A started process with its own process group, with pipes on fds 0–4. */
export interface LaunchedProcess {
  readonly pid: number | undefined;
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

/** Port for starting processes, so the subprocess tier can be tested with a fake. */
export abstract class ProcessLauncher {
  abstract launch(spec: LaunchSpec): LaunchedProcess;
  /**
   * Kills processes launched by engines that are no longer running (found by the engine mark in their
   * environment, see `ENGINE_MARK_ENV`); returns their pids. Default: none to find.
   */
  reapOrphans(): number[] {
    return [];
  }
}

/** `child_process.spawn` in a new session/process group (`detached`), with pipes on fds 0–4. */
@Injectable()
export class ChildProcessLauncher extends ProcessLauncher {
  private readonly logger = new Logger(ChildProcessLauncher.name);

  launch(spec: LaunchSpec): LaunchedProcess {
    const child = spawn(spec.command, spec.args, {
      env: spec.env,
      cwd: spec.cwd,
      detached: true,
      stdio: ['pipe', 'pipe', 'pipe', 'pipe', 'pipe'],
      ...(spec.uid !== undefined && { uid: spec.uid }),
      ...(spec.gid !== undefined && { gid: spec.gid }),
    });
    const closed = new Promise<ProcessExit>((resolve) => {
      child.once('error', (error) => resolve({ code: null, signal: null, error }));
      child.once('close', (code, signal) => resolve({ code, signal }));
    });
    const pid = child.pid;
    this.logger.debug(`spawned ${spec.command} pid=${pid ?? 'none'}`);
    return {
      pid,
      stdin: child.stdin,
      stdout: child.stdout,
      stderr: child.stderr,
      status: child.stdio[3] as Readable,
      control: child.stdio[4] as Writable,
      closed,
      killGroup: () => {
        if (pid === undefined) return;
        try {
          process.kill(-pid, 'SIGKILL');
        } catch (err) {
          // ESRCH: the group is already gone, which is what we wanted.
          if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
        }
      },
    };
  }

  override reapOrphans(): number[] {
    return reapOrphanedSandboxes();
  }
}
