import type { Language } from '@switchyard/common';

/*
 * The messages of the runner protocol (JSON lines; docker/sandbox/runner/README.md) as the engine types them.
 * `RunnerConnection` speaks it.
 */

/**
 * Protocol version this engine speaks; see docker/sandbox/runner/README.md. 2: every run names the workspace the
 * runner must see (an older runner would ignore that, so it is refused at `hello`). 3: kernels and background
 * processes beside the runs. 4: cells' rich results. 5: tunnels to the box's ports, terminals, the listening ports. 6:
 * back channels (tunnels the runner opens, for a box the engine cannot mount its egress or call socket into), a
 * resync for a new engine taking over a live runner, and workspace snapshots walked by the runner itself.
 */
export const RUNNER_PROTOCOL = 6;

export interface RunnerHello {
  protocol: number;
  pid: number;
  python: string;
  /** The runner can read the container's OOM-kill counter, so out-of-memory is reported precisely. */
  oomCounter: boolean;
  /** It holds kernels and background processes (protocol 3). */
  stateful?: boolean;
  /** It listens on the box's relay socket for raw-byte connections to the box's ports (see runner-relay.ts). */
  relay?: boolean;
}

export interface RunnerPong {
  ok: boolean;
  busy: boolean;
  ms: number;
  /** `st_dev` and `st_ino` of /workspace as the container sees it. */
  workspace?: [number, number];
  error?: string;
}

export interface RunnerRunRequest {
  language: Language;
  /** Interpreter path inside the sandbox, when not the runner's default (/usr/bin/python3, /usr/bin/node, /bin/bash). */
  interpreter?: string;
  code: string;
  stdin?: string;
  env: Record<string, string>;
  timeoutMs: number;
  /** RLIMIT_CPU of the interpreter, 0 for none. */
  cpuSeconds: number;
  /** Per stream: the runner stops reading and ends the run past these (a backstop; the engine keeps the exact caps). */
  capBytes: number;
  capLines: number;
  /**
   * Device and inode (decimal) of the session workspace on the host. The runner refuses the run, before anything
   * starts, unless /workspace is that directory (`RunnerRefusedError` with code `workspace`).
   */
  workspace: [dev: string, ino: string];
  /**
   * Walk the workspace once the run ended, with these bounds, and send the snapshot in the exit (`exit.snapshot`): a
   * code action's snapshot after its run, without a request of its own.
   */
  snapshot?: { maxEntries: number; maxScanEntries: number };
  /**
   * A run made for the fresh run under way (its action's call: a skill's file tool or nested skill), beside it: its
   * end kills only its own processes; the outer run's end kills it too. Refused (`busy`) when no run is under way.
   */
  nested?: boolean;
  /**
   * After this python run, the runner starts the next interpreter with this request's environment in this workspace,
   * for the box's next run with the same ones (docker/sandbox/runner/runner_standby.py); such a run answers `ahead`.
   */
  standby?: boolean;
}

export interface RunnerExit {
  exitCode: number | null;
  signal: string | null;
  timedOut: boolean;
  ended: null | 'timeout' | 'output' | 'kill';
  capped: { stdout: boolean; stderr: boolean };
  oomKilled: boolean;
  pidsLimitHit: boolean;
  /** Processes still alive when the interpreter exited, all killed. */
  leftovers: number;
  durationMs: number;
  spawnError: string | null;
  /**
   * The runner exits right after this event and the kubelet restarts it in a fresh cgroup: the OOM killer took the
   * code, yet the container's memory stays at its limit, held by no process (a memory-backed /tmp full of files).
   * Only runners told so (SWITCHYARD_RUNNER_RESTART_WHEN_PINNED, the Kubernetes session pods) do it.
   */
  restarting?: boolean;
  /** The run's interpreter was started ahead, after the box's previous run (`RunnerRunRequest.standby`). */
  ahead?: boolean;
  /**
   * With the request's `snapshot`: the walk's answer as `snapshot` answers it. Absent when the runner could not send
   * it (the workspace no longer the session's, an answer over 4 MiB): `snapshot` then says why.
   */
  snapshot?: Record<string, unknown>;
}

/** How a kernel or process ended: its exit code, or the signal that killed it. */
export interface RunnerExitStatus {
  exitCode: number | null;
  signal: string | null;
}

export interface KernelStartRequest {
  /** The engine's id for it (`krn_…`); the runner refuses one that is live with code `exists`. */
  kernel: string;
  language: Language;
  /** Interpreter path inside the sandbox, when not the runner's default (/usr/bin/python3, /usr/bin/node, /bin/bash). */
  interpreter?: string;
  /** Its whole environment. */
  env: Record<string, string>;
  /** As in a run: the runner refuses (code `workspace`) unless /workspace is this directory. */
  workspace: [dev: string, ino: string];
  /** The engine's own record of it, kept by the runner and given back by `resync` (an engine that adopts the box). */
  meta?: Record<string, unknown>;
}

export interface CellRequest {
  kernel: string;
  code: string;
  /** Set in the kernel before the cell runs, and kept (as a user setting them would). */
  env: Record<string, string>;
  /** Then the runner interrupts the cell; `graceMs` later, if it still runs, it kills the kernel. */
  timeoutMs: number;
  graceMs: number;
  /** Per stream, as in a run; past them the cell is interrupted (same grace). */
  capBytes: number;
  capLines: number;
  /**
   * Rich results inlined at most, per result and per cell; the kernel writes the rest to workspace files. Default:
   * the kernel's own (1 MiB, 4 MiB).
   */
  results?: { maxBytes: number; cellMaxBytes: number };
}

export interface CellDone {
  kernel: string;
  /** Cells the kernel has run, this one included. */
  count: number;
  ok: boolean;
  /** repr (python) / util.inspect (node) of the last expression; null for none and in bash. */
  result: string | null;
  error: { name: string; message: string } | null;
  /** bash: the last command's status; python/node: 0 when ok, 1 when it raised (SystemExit: its code). */
  exitCode: number | null;
  /** Stopped by an interrupt, with the kernel's state kept. */
  interrupted: boolean;
  timedOut: boolean;
  /** What made the runner stop it, if anything. */
  ended: null | 'timeout' | 'output' | 'interrupt' | 'kill';
  capped: { stdout: boolean; stderr: boolean };
  /** The kernel died during the cell (killed past the grace, OOM, exit): it is gone. */
  stateLost: boolean;
  /** From the container's cgroup counter; null where the runner cannot read it (bubblewrap). */
  oomKilled: boolean | null;
  kernelExit: RunnerExitStatus | null;
  durationMs: number;
}

export interface InterruptAck {
  found: boolean;
  /** A cell was running, and was sent the interrupt. */
  running: boolean;
}

export interface ProcStartRequest {
  proc: string;
  /** Run by `/bin/bash --noprofile --norc -c`. */
  command: string;
  /** Relative to /workspace; the runner refuses (code `cwd`) one that is not a directory inside it. */
  cwd: string;
  env: Record<string, string>;
  workspace: [dev: string, ino: string];
  /** The engine's own record of it, kept by the runner and given back by `resync`. */
  meta?: Record<string, unknown>;
}

/** What a resynced runner has alive: its kernels (`busy`: a cell still ran at the answer) and processes. */
export interface RunnerResynced {
  protocol: number;
  pid: number;
  /** `st_dev` and `st_ino` of /workspace as the runner sees it. */
  workspace?: [number, number];
  error?: string;
  kernels: Array<{
    kernel: string;
    language: Language;
    pid: number;
    count: number;
    busy: boolean;
    meta: Record<string, unknown> | null;
  }>;
  procs: Array<{ proc: string; pid: number; meta: Record<string, unknown> | null }>;
}

export type ProcSignalName = 'TERM' | 'INT' | 'KILL' | 'HUP' | 'USR1' | 'USR2';

/** Output of a background process, as it arrives (uncapped: the engine keeps a bounded log). */
export interface ProcOutputEvent {
  ev: 'pout';
  proc: string;
  fd: 1 | 2;
  data: Buffer;
}

/** A background process ended (its leftovers killed, its output all sent). */
export interface ProcExitEvent extends RunnerExitStatus {
  ev: 'pexit';
  proc: string;
}

/** A kernel died: between cells, or after the `cell_done` (with `stateLost`) of the cell it died in. */
export interface KernelExitEvent extends RunnerExitStatus {
  ev: 'kernel_exit';
  kernel: string;
  oomKilled: boolean | null;
}

export interface TermOpenRequest {
  /** The engine's id for it (`trm_…`); the runner refuses one that is live with code `exists`. */
  term: string;
  /** Window size, each from 1 to 1000. */
  cols: number;
  rows: number;
  /** Its whole environment (the engine sets TERM). */
  env: Record<string, string>;
  /** Relative to /workspace; the runner refuses (code `cwd`) one that is not a directory inside it. */
  cwd: string;
  /** As in a run: the runner refuses (code `workspace`) unless /workspace is this directory. */
  workspace: [dev: string, ino: string];
  /** Run by `/bin/bash --noprofile --norc -c` instead of a shell that reads a login shell's files (terminal_profile.sh). */
  command?: string;
}

/** A TCP socket in LISTEN in the box's network namespace, and whose tree holds it (if one of the runner's). */
export interface ListeningPort {
  port: number;
  /** What it is bound to: `127.0.0.1`, `0.0.0.0`, `::`, `::1`… */
  address: string;
  proc: string | null;
  kernel: string | null;
}

/** Output of a terminal, as it arrives (uncapped: the engine keeps a bounded scrollback). */
export interface TermOutputEvent {
  ev: 'tout';
  term: string;
  data: Buffer;
}

/** A terminal's shell ended (its leftovers killed, its output all sent). */
export interface TermExitEvent extends RunnerExitStatus {
  ev: 'texit';
  term: string;
}

/** What a tunnel the runner opened is for (`tunnel_in`): the box's egress, or the call channel of run `run`. */
export interface BackChannelTarget {
  target: 'egress' | 'call';
  run: string | null;
}

/** A workspace snapshot walked by the runner itself (`snapshot`, runner_snapshot.py). */
export interface RunnerSnapshotRequest {
  /** Files and links recorded at most before the snapshot is `partial`. */
  maxEntries: number;
  /** Entries looked at at most (directories included) before it is `partial`. */
  maxScanEntries: number;
  /** As in a run: the runner refuses (code `workspace`) unless /workspace is this directory. */
  workspace: [dev: string, ino: string];
}

/** What the runner reports on its own, with no request. */
export type RunnerEvent = ProcOutputEvent | ProcExitEvent | KernelExitEvent | TermOutputEvent | TermExitEvent;
