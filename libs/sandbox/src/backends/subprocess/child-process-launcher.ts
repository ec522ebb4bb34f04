import { spawn } from 'node:child_process';
import type { Readable, Writable } from 'node:stream';
import { Injectable, Logger } from '@nestjs/common';
import { reapOrphanedSandboxes } from './orphan-reaper';
import {
  killProcessGroup,
  type LaunchedProcess,
  type LaunchSpec,
  type ProcessExit,
} from '@switchyard/common';
import { ProcessLauncher } from './process-launcher';

/**
 * `child_process.spawn` in a new session/process group (`detached`), with pipes on fds 0–4, from the engine's own
 * process. The fork copies the engine's page tables while its event loop waits (Node 24 here: 1.6 ms at 50 MB
 * resident, 14 ms at 550 MB, 31 ms at 1 GB), so the engine launches through its spawner (`SpawnerProcessLauncher`); this one is the
 * baseline the benchmarks compare it with, and what tools that are not the engine use.
 */
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
      started: Promise.resolve(pid),
      stdin: child.stdin,
      stdout: child.stdout,
      stderr: child.stderr,
      status: child.stdio[3] as Readable,
      control: child.stdio[4] as Writable,
      closed,
      killGroup: () => {
        if (pid !== undefined) killProcessGroup(pid);
      },
    };
  }

  override reapOrphans(): number[] {
    return reapOrphanedSandboxes();
  }
}
