import type { Language } from '@switchyard/common';
import type { RunnerConnection } from '../runner/runner-connection';
import type { SessionEgressAccess } from '../sandbox.types';
import type { StatefulTier } from './stateful.types';

/**
 * The sandbox of one session that holds its kernels and background processes, in one tier: the session's pooled
 * container, or its long-lived bubblewrap sandbox in the subprocess tier. Either way a runner
 * (docker/sandbox/runner/runner.py) is its main process and the engine talks to it over `connection`.
 */
export interface StatefulBox {
  readonly tier: StatefulTier;
  readonly sessionId: string;
  /** The container, when the box is one (pooled tier): a cell's action gets a `RAN_IN` edge to it too. */
  readonly containerId?: string;
  readonly connection: RunnerConnection;
  /**
   * Host path of the runner's relay socket, when the box shares a directory with the host and its runner listens
   * there: connections to the box's ports then go as raw bytes (`dialRelay`) instead of through `connection`.
   */
  readonly relaySocket?: string;
  /** Device and inode of the session workspace as the host sees it; the runner starts nothing elsewhere. */
  readonly workspace: [dev: string, ino: string];
  /** Interpreter paths as seen inside the box, where they differ from the runner's defaults. */
  readonly interpreters: Partial<Record<Language, string>>;
  /** Resolves once the box is gone (runner died, container destroyed, session released, shutdown). */
  readonly closed: Promise<void>;
  /**
   * Keeps the box from being reclaimed for idleness while its kernels or processes live (a pooled container is
   * otherwise freed after `sessionIdleTimeoutMs` without runs). Returns the release; idempotent.
   */
  pin(): () => void;
  /**
   * Whether the kernel's OOM killer fired in the box since the last call, where the host can read the box's cgroup
   * (subprocess tier). `undefined` where it cannot: the runner's own report is used then.
   */
  oomKilledSinceLastCheck?(): boolean | undefined;
}

/** A kernel found alive in an adopted box, as its runner reports it; `record`: what the engine gave at its start. */
export interface AdoptedKernel {
  id: string;
  language: Language;
  pid: number;
  executionCount: number;
  record: Record<string, unknown> | null;
}

/** A background process found running in an adopted box; `record`: what the engine gave at its start. */
export interface AdoptedProcess {
  id: string;
  pid: number;
  record: Record<string, unknown> | null;
}

/**
 * A box this engine took over from one that went away (a Kubernetes session pod whose runner outlived its engine),
 * with the kernels and processes alive in it: the registries take them back under the same ids.
 */
export interface AdoptedBox {
  box: StatefulBox;
  kernels: AdoptedKernel[];
  processes: AdoptedProcess[];
}

/** What a tier that can hold state offers: the session's box, opened on first use. */
export abstract class StatefulBoxHost {
  private readonly adoptionListeners: Array<(adopted: AdoptedBox) => void> = [];
  abstract readonly tier: StatefulTier;
  /** The memory limit a box's kernels and processes share, for out-of-memory messages. */
  abstract readonly memoryBytes: number;

  /**
   * The session's box, opening one (claiming a pooled container, launching a sandbox) when it has none or its last
   * one is gone; `image` is the session's own (a template's) for a container box. Throws `SandboxError`s like the
   * tier's `run` (capacity, unavailable).
   */
  abstract box(
    sessionId: string,
    workspaceDir: string,
    egress?: SessionEgressAccess,
    image?: string,
  ): Promise<StatefulBox>;

  /**
   * The session's box when one is open and its runner answers, else undefined. Never opens one: reaching a session's
   * server (`SessionPorts`) finds it where the session already runs something.
   */
  abstract existing(sessionId: string): StatefulBox | undefined;

  /** Ends the session's box (everything in it dies) because it stopped answering; the next `box` opens a new one. */
  abstract discard(box: StatefulBox, why: string): Promise<void>;

  /** Hears of every box the host adopts, before the box serves anything (`SessionKernels`, `SessionProcesses`). */
  onAdopted(listener: (adopted: AdoptedBox) => void): void {
    this.adoptionListeners.push(listener);
  }

  /** For hosts that adopt boxes: tells the listeners, synchronously; a listener that throws disturbs no other. */
  protected emitAdopted(adopted: AdoptedBox): void {
    for (const listener of this.adoptionListeners) {
      try {
        listener(adopted);
      } catch {
        // the listener's own failure (it logs); the others still hear of the box
      }
    }
  }
}
