import * as fs from 'node:fs';
import type { Logger } from '@nestjs/common';
import type { Language } from '@switchyard/common';
import { BASE_ENV } from '../../core/env-policy';
import { RunnerConnection } from '../../core/runner/runner-connection';
import { SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { ResolvedSandboxOptions } from '../../core/sandbox.options';
import { type StatefulBox, StatefulBoxHost } from '../../core/stateful/stateful-box.port';
import type { PendingCleanups } from '../../core/supervision/pending-cleanups';
import { buildLauncherCommand, buildRunArgs, encodeArgs } from './bwrap-command';
import { cgroupName, ENGINE_MARK_ENV, formatEngineMark } from './engine-mark';
import type { LaunchedProcess, ProcessLauncher } from './process-launcher';
import type { LimitGroup, ProcessLimiter } from './process-limiter';
import type { Scaffold } from './sandbox-scaffold';
import type { SessionGroups } from './session-groups';

/** Where the runner directory appears inside the sandbox: the same path as in the container image. */
export const RUNNER_TARGET = '/opt/switchyard/runner';
/** The runner's scratch directory (cell files), a tmpfs of its own as in the pooled container. */
const RUNNER_SCRATCH = '/run/switchyard';
const HELLO_TIMEOUT_MS = 10_000;
/** A box with no kernel or process left is closed this long after the last one ended. */
const EMPTY_BOX_CLOSE_MS = 30_000;
const NODE_MIN_ADDRESS_SPACE = 4 * 1024 ** 3;

/** A session's stateful sandbox in this tier. */
export type SubprocessBox = Box;

interface Box extends StatefulBox {
  readonly proc: LaunchedProcess;
  readonly group?: LimitGroup;
  pins: number;
  emptyTimer?: NodeJS.Timeout;
  oomKillsSeen: number;
  /** The group's OOM kill count when the box died, read before its cgroup is removed. */
  oomKillsAtClose?: number;
  gone: boolean;
}

/**
 * The subprocess tier's stateful sandboxes: one long-lived bubblewrap sandbox per session that asks for state, with
 * the confinement of every subprocess-tier run (all namespaces unshared, so no network but its own loopback; the
 * sandbox uid; read-only system; only /workspace, /tmp and the runner's scratch writable; niceness 19; dies with
 * the engine) and one cgroup with the tier's memory, pids and CPU limits for everything in it, under the session's
 * group (`SessionGroups`): kernels and processes share the session's CPU quota with its code actions. Its main process
 * is the runner the pooled containers run (docker/sandbox/runner/runner.py, bound read-only), which starts the
 * session's kernels and background processes. No CPU-time rlimit: kernels live long; the cgroup caps the CPU rate
 * and each cell's timeout its time.
 */
export class SubprocessBoxes extends StatefulBoxHost {
  readonly tier = 'subprocess' as const;
  readonly memoryBytes: number;
  private readonly boxes = new Map<string, Promise<Box>>();
  /** The boxes that finished opening, by session, for `existing` (which cannot wait). */
  private readonly opened = new Map<string, Box>();
  private closed = false;

  constructor(
    private readonly options: ResolvedSandboxOptions,
    private readonly launcher: ProcessLauncher,
    private readonly limiter: ProcessLimiter,
    private readonly sessions: SessionGroups,
    /** The scaffold for a session's image (the default image when none). */
    private readonly scaffold: (image?: string) => Promise<Scaffold>,
    private readonly cleanups: PendingCleanups,
    private readonly logger: Logger,
  ) {
    super();
    this.memoryBytes = options.subprocess.memoryBytes;
  }

  /** False (with the reason) when the engine was given no runner directory to bind in. */
  get problem(): string | undefined {
    const dir = this.options.stateful.runnerDir;
    if (!dir) return 'no runner directory is configured (stateful.runnerDir)';
    if (!fs.existsSync(`${dir}/runner.py`)) return `${dir}/runner.py does not exist`;
    return undefined;
  }

  async box(
    sessionId: string,
    workspaceDir: string,
    _egress?: unknown,
    image?: string,
  ): Promise<StatefulBox> {
    const existing = this.boxes.get(sessionId);
    if (existing) {
      const box = await existing.catch(() => undefined);
      if (box && !box.gone) return box;
      if (this.boxes.get(sessionId) === existing) this.boxes.delete(sessionId);
    }
    if (this.closed) throw new SandboxUnavailableError('the subprocess tier is shutting down');
    const problem = this.problem;
    if (problem) throw new SandboxUnavailableError(`the subprocess tier cannot hold state: ${problem}`);
    const opening = this.open(sessionId, workspaceDir, image);
    this.boxes.set(sessionId, opening);
    opening.then(
      (box) => {
        if (this.boxes.get(sessionId) !== opening) return;
        this.opened.set(sessionId, box);
        void box.closed.then(() => {
          if (this.opened.get(sessionId) === box) this.opened.delete(sessionId);
        });
      },
      () => {
        if (this.boxes.get(sessionId) === opening) this.boxes.delete(sessionId);
      },
    );
    return opening;
  }

  existing(sessionId: string): StatefulBox | undefined {
    const box = this.opened.get(sessionId);
    return box && !box.gone ? box : undefined;
  }

  /**
   * The session's box when it is open and holds a running kernel or process (it is pinned), else undefined. Never
   * opens one.
   */
  async live(sessionId: string): Promise<SubprocessBox | undefined> {
    const box = await this.boxes.get(sessionId)?.catch(() => undefined);
    return box && !box.gone && box.pins > 0 ? box : undefined;
  }

  async discard(box: StatefulBox, why: string): Promise<void> {
    this.logger.warn(`session ${box.sessionId}: stateful sandbox discarded (${why})`);
    await this.kill(box as Box);
  }

  /** The session ended: its sandbox, kernels and processes with it. */
  async release(sessionId: string): Promise<void> {
    const entry = this.boxes.get(sessionId);
    this.boxes.delete(sessionId);
    const box = await entry?.catch(() => undefined);
    if (box) await this.kill(box);
  }

  /** Shutdown: every box dies; none opens after. */
  async close(): Promise<void> {
    this.closed = true;
    const all = [...this.boxes.values()];
    this.boxes.clear();
    await Promise.allSettled(all.map(async (p) => this.kill(await p)));
  }

  private async open(sessionId: string, workspaceDir: string, image?: string): Promise<Box> {
    const scaffold = await this.scaffold(image);
    const workspace = await workspaceId(workspaceDir);
    const s = this.options.subprocess;
    const python = scaffold.sandboxInterpreters.python;
    if (!python)
      throw new SandboxUnavailableError(`no python3 for the runner: ${scaffold.interpreters.python.problem}`);
    const binds = [
      ...new Map(
        (['python', 'node', 'bash'] as const)
          .flatMap((l) => scaffold.readOnlyBinds[l])
          .map((b) => [b.target, b]),
      ).values(),
      { source: this.options.stateful.runnerDir!, target: RUNNER_TARGET },
    ];
    const launch = buildLauncherCommand({
      setprivPath: this.options.setprivPath,
      nicePath: this.options.nicePath,
      prlimitPath: this.options.prlimitPath,
      bwrapPath: this.options.bwrapPath,
      rlimits: {
        // Node reserves 4 GiB of address space; without a cgroup this is the only memory bound there is.
        addressSpaceBytes:
          s.addressSpaceBytes ??
          (this.limiter.mode === 'none' ? Math.max(s.memoryBytes, NODE_MIN_ADDRESS_SPACE) : undefined),
        fileSizeBytes: s.fileSizeBytes,
        openFiles: s.openFiles,
      },
      sandbox: {
        layout: scaffold.layout,
        etc: scaffold.etc,
        readOnlyBinds: binds,
        tmpfsBytes: s.tmpfsBytes,
        extraTmpfs: [RUNNER_SCRATCH],
      },
      argv: [python, '-I', '-S', `${RUNNER_TARGET}/runner.py`],
    });
    const hold = this.sessions.hold(sessionId);
    let group: LimitGroup | undefined;
    try {
      group = this.limiter.create(
        cgroupName(),
        { memoryBytes: s.memoryBytes, pids: s.pids, cpus: s.cpus },
        { oomGroup: false, parent: hold.parent },
      );
    } catch (err) {
      hold.release();
      throw err;
    }
    // The session group stays while the box's own group does.
    const removeGroup = () =>
      group ? this.cleanups.track(group.destroy().finally(() => hold.release())) : hold.release();
    let proc: LaunchedProcess;
    try {
      proc = this.launcher.launch({
        ...launch,
        env: { [ENGINE_MARK_ENV]: formatEngineMark() },
        cwd: '/',
        uid: this.options.runAs?.uid,
        gid: this.options.runAs?.gid,
      });
      const pid = await proc.started;
      if (group && pid !== undefined) await group.join(pid);
    } catch (err) {
      removeGroup();
      throw new SandboxInternalError(
        'BOX_START',
        `cannot launch the stateful sandbox: ${(err as Error).message}`,
        {
          retriable: true,
          cause: err,
        },
      );
    }
    let stderr = '';
    proc.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString('utf8')).slice(-2000)));
    for (const s of [proc.status, proc.stderr]) s.on('error', () => undefined);
    for (const w of [proc.control, proc.stdin]) w.on('error', () => undefined);
    proc.status.resume();
    const connection = new RunnerConnection({
      stdin: proc.stdin,
      stdout: proc.stdout,
      closed: proc.closed.then(() => undefined),
      close: () => proc.killGroup(),
    });
    // The runner's environment; kernels and processes get theirs in each request.
    proc.control.end(
      encodeArgs(
        buildRunArgs({
          workspaceDir: workspace.path,
          env: { PATH: BASE_ENV.PATH, LANG: 'C.UTF-8', HOME: '/tmp' },
        }),
      ),
    );
    const box: Box = {
      tier: 'subprocess',
      sessionId,
      connection,
      workspace: workspace.id,
      interpreters: interpretersInside(scaffold),
      closed: connection.closed,
      proc,
      group,
      pins: 0,
      oomKillsSeen: 0,
      gone: false,
      pin: () => this.pin(box),
      oomKilledSinceLastCheck: () => {
        const kills = box.oomKillsAtClose ?? group?.report().oomKills;
        if (kills === undefined) return undefined;
        const fresh = kills > box.oomKillsSeen;
        box.oomKillsSeen = kills;
        return fresh;
      },
    };
    void connection.closed.then(() => {
      box.gone = true;
      clearTimeout(box.emptyTimer);
      // A box the OOM killer took (its /tmp filled its memory: tmpfs pages, inodes and dentries are charged to its
      // cgroup, and killing processes frees none of them) is a limit, not a fault: keep the count its cell reads.
      box.oomKillsAtClose = group?.report().oomKills;
      removeGroup();
    });
    try {
      await withTimeout(connection.hello, HELLO_TIMEOUT_MS, 'the runner did not start');
    } catch (err) {
      await this.kill(box);
      throw new SandboxInternalError(
        'BOX_START',
        `the stateful sandbox did not start: ${(err as Error).message}${stderr ? `; ${stderr.trim().slice(-300)}` : ''}`,
        { retriable: true, cause: err },
      );
    }
    this.logger.debug(`session ${sessionId}: stateful sandbox started (pid ${proc.pid ?? '?'})`);
    return box;
  }

  private pin(box: Box): () => void {
    box.pins++;
    clearTimeout(box.emptyTimer);
    let released = false;
    return () => {
      if (released) return;
      released = true;
      if (--box.pins > 0 || box.gone) return;
      box.emptyTimer = setTimeout(() => {
        if (box.pins > 0 || box.gone) return;
        if (this.boxes.get(box.sessionId) !== undefined) this.boxes.delete(box.sessionId);
        void this.kill(box);
      }, EMPTY_BOX_CLOSE_MS);
      box.emptyTimer.unref();
    };
  }

  private async kill(box: Box): Promise<void> {
    box.gone = true;
    clearTimeout(box.emptyTimer);
    box.connection.close();
    box.proc.killGroup();
    await box.group?.kill();
    await box.proc.closed;
  }
}

/** Interpreter paths inside the sandbox where they are not the runner's defaults (/usr/bin/python3, …). */
function interpretersInside(scaffold: Scaffold): Partial<Record<Language, string>> {
  const defaults: Record<Language, string> = {
    python: '/usr/bin/python3',
    node: '/usr/bin/node',
    bash: '/bin/bash',
  };
  const out: Partial<Record<Language, string>> = {};
  for (const language of ['python', 'node', 'bash'] as const) {
    const inside = scaffold.sandboxInterpreters[language];
    if (inside && inside !== defaults[language]) out[language] = inside;
  }
  return out;
}

async function workspaceId(dir: string): Promise<{ path: string; id: [string, string] }> {
  try {
    const real = await fs.promises.realpath(dir);
    const st = await fs.promises.stat(real, { bigint: true });
    if (!st.isDirectory()) throw new Error('not a directory');
    return { path: real, id: [st.dev.toString(), st.ino.toString()] };
  } catch (err) {
    throw new SandboxInternalError('WORKSPACE_MISSING', `workspace ${dir}: ${(err as Error).message}`);
  }
}

function withTimeout<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    p,
    new Promise<never>(
      (_, reject) => (timer = setTimeout(() => reject(new Error(`${what} within ${ms} ms`)), ms)),
    ),
  ]).finally(() => clearTimeout(timer));
}
