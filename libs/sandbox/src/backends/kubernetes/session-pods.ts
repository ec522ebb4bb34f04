import type { Logger } from '@nestjs/common';
import type { Clock } from '@switchyard/common';
import { engineDeadHere } from '../../core/engine-instance';
import { PoolExhaustedError, RunnerLostError } from '../../core/pooled.errors';
import { SandboxError, SandboxInternalError, SandboxUnavailableError } from '../../core/sandbox.errors';
import type { ExecStream, KubeClient } from './kube-client';
import { RUNNER_CONTAINER } from './kubernetes.constants';
import { SessionPodError } from './kubernetes.errors';
import type { ResolvedKubernetesOptions } from './kubernetes.options';
import type { PodLauncher } from './pod-launcher';
import { type AdoptedPod, PodAdoption } from './pod-adoption';
import { PodHolds } from './pod-holds';
import { attachRunner, runnerStatus } from './pod-runner';
import { memoryWords, PodRuns, type RawRunRequest, type RawRunResult, type RunTarget } from './pod-runs';
import { podName, sessionPodManifest, sessionPodSpecHash } from './pod-spec';
import type { RunnerLoss, RunnerRecovery } from './runner-recovery';
import { SessionPod } from './session-pod';
import type { WarmPods } from './warm-pods';
import { tarIn, type TarInOptions, tarOut } from './workspace-tar';

/** `runInPod`: a fresh run through the session's runner, raw output (the file API, checkpoints). */
export type RunInPodRequest = RawRunRequest;
export type RunInPodResult = RawRunResult;

/** One session pod, for operators and tests. */
export interface SessionPodInfo {
  sessionId: string;
  pod: string;
  image: string;
  warm: boolean;
  alive: boolean;
  busy: number;
  runnerPid?: number;
  workspace: [string, string];
  claimedAt: string;
}

/**
 * Which session holds which pod. A session's first use claims one (a warm pod of the pool, else one started for it,
 * e.g. for a session image), holds it until `release` (which deletes it): the pod's `/workspace` is the session's
 * workspace, so it is never reclaimed for idleness. Everything done in it (runs, copies) is serialised per session.
 * When its runner's connection closes (the code killed it, OOM), the run in flight fails (`RUNNER_LOST`) or reports
 * out-of-memory, and the next use waits for the kubelet to restart the runner and re-attaches (`RunnerRecovery`).
 */
export class SessionPods {
  private readonly sessions = new Map<string, Promise<SessionPod>>();
  private readonly pods = new Map<string, SessionPod>();
  /** Sessions that ended and whose pod's deletion is under way: they no longer count against `maxSessions`. */
  private readonly ending = new Set<string>();
  /** Runs that hold a pod for their calls (a skill's body), and whose calls are served beside them. */
  private readonly holds = new PodHolds();
  private claiming = 0;
  private closing = false;
  /** Replicas another replica declared dead whose session pods this engine takes over (`adoptFrom`). */
  private readonly takenOver = new Set<string>();
  private readonly adoption: PodAdoption;
  private adoptionListener?: (adopted: AdoptedPod) => void;
  /** Bounds of the snapshot the runner takes after each tier run (`walkAfterRuns`); none without. */
  private walkBounds?: { maxEntries: number; maxScanEntries: number };
  /** Duration of the latest claim, in ms. */
  lastClaimMs?: number;

  constructor(
    private readonly client: KubeClient,
    private readonly options: ResolvedKubernetesOptions,
    private readonly launcher: PodLauncher,
    private readonly warm: WarmPods | undefined,
    private readonly recovery: RunnerRecovery,
    private readonly runs: PodRuns,
    private readonly clock: Clock,
    private readonly logger: Logger,
    adoption?: PodAdoption,
  ) {
    this.adoption = adoption ?? new PodAdoption(client, options, clock, logger);
  }

  get closed(): boolean {
    return this.closing;
  }

  /**
   * The session's pod with a live runner: claimed at the session's first use (`image`: a session image instead of the
   * default; such pods are started for the session, never warm), re-attached after its runner died. `adopt`: a
   * session this engine serves after another one did (a restart, a replica's death): its pod is adopted from that
   * engine when it is still there (`PodAdoption`), with its workspace, kernels and processes.
   */
  async podFor(sessionId: string, image?: string, options: { adopt?: boolean } = {}): Promise<SessionPod> {
    if (this.closing) throw new SandboxUnavailableError('the Kubernetes sandbox backend is shutting down');
    let entry = this.sessions.get(sessionId);
    if (!entry) {
      const claiming = this.claim(sessionId, image, options.adopt === true);
      entry = claiming;
      this.sessions.set(sessionId, claiming);
      claiming.catch(() => {
        if (this.sessions.get(sessionId) === claiming) this.sessions.delete(sessionId);
      });
    }
    const pod = await entry;
    await this.ensureRunner(pod);
    return pod;
  }

  /** The session's pod when it holds one whose runner answers, without claiming one or waiting for a runner. */
  current(sessionId: string): SessionPod | undefined {
    const pod = this.pods.get(sessionId);
    return pod?.alive && !this.closing ? pod : undefined;
  }

  /** Runs `fn` once every earlier operation on the pod has settled, with the runner back if it was lost. */
  serialise<T>(pod: SessionPod, fn: () => Promise<T>): Promise<T> {
    pod.busy++;
    const next = pod.tail.then(async () => {
      await this.ensureRunner(pod);
      pod.ops++;
      return fn();
    });
    pod.tail = next.catch(() => undefined);
    return next.finally(() => pod.busy--);
  }

  /**
   * `fn` with the pod's workspace as a target: serialised with everything else done in the pod, unless the calling
   * action's own run holds the pod (`callingAction`, `holding`): a skill's file tool or nested skill then runs at
   * once, beside that run and nested in it, in the workspace that run sees (a one-off pod's copy for a one-off run).
   * Queued, it would wait for the run that waits for it.
   */
  withPod<T>(pod: SessionPod, fn: (target: RunTarget) => Promise<T>): Promise<T> {
    const held = this.holds.heldFor(pod);
    if (held) return fn(held);
    return this.serialise(pod, () => fn(this.target(pod)));
  }

  /**
   * `fn` (a run of action `actionId` that may make calls: a job with a call channel), holding the pod with `target`'s
   * workspace: the action's calls come in beside it (`withPod`) until `fn` settles. The caller already holds the pod
   * (`serialise`, or `withPod` for a nested skill).
   */
  holding<T>(pod: SessionPod, actionId: string, target: RunTarget, fn: () => Promise<T>): Promise<T> {
    return this.holds.holding(pod, actionId, target, fn);
  }

  /** How many runs hold the pod for their calls (for tests). */
  holdCount(pod: SessionPod): number {
    return this.holds.count(pod);
  }

  /** A fresh run through the session's runner, with raw output; serialised with the session's runs. */
  async runInPod(sessionId: string, request: RunInPodRequest): Promise<RunInPodResult> {
    const pod = await this.podFor(sessionId);
    return this.withPod(pod, (target) => this.runs.runRaw(target, request));
  }

  /**
   * The workspace's files and links as the session's runner walks them itself (no process started): the workspace
   * tool's snapshot answer. Serialised with the session's runs, so it never sees half of one.
   */
  async snapshot(
    sessionId: string,
    bounds: { maxEntries: number; maxScanEntries: number },
    timeoutMs: number,
    options: { afterRun?: boolean } = {},
  ): Promise<Record<string, unknown>> {
    const pod = await this.podFor(sessionId);
    // A call's snapshot (a nested skill's code action): the workspace the calling run sees, walked now.
    const held = this.holds.heldFor(pod);
    if (held) return this.runs.snapshot(held, bounds, timeoutMs);
    const walked = pod.walked;
    pod.walked = undefined;
    // The walk the runner took as the run ended, sent with its exit, when nothing has run in the pod since.
    if (options.afterRun && walked?.op === pod.ops && walked.bounds === JSON.stringify(bounds))
      return walked.answer;
    return this.serialise(pod, () => this.runs.snapshot(this.target(pod), bounds, timeoutMs));
  }

  /**
   * From now on the runner walks the workspace after every tier run (`KubernetesPooledTier.run`) with these bounds
   * and sends the snapshot with the run's exit, where `snapshot(…, { afterRun: true })` finds it: a code action's
   * snapshot after its run costs no request of its own.
   */
  walkAfterRuns(bounds: { maxEntries: number; maxScanEntries: number }): void {
    this.walkBounds = bounds;
  }

  /**
   * `argv` in the session pod's runner container (as the sandbox user, within the pod's limits) with its stdio
   * streamed: the file transfer API's bytes, which never sit whole in the engine. Not serialised by itself: a caller
   * that changes the workspace holds `exclusive` until the command ended.
   */
  async execStream(sessionId: string, argv: string[]): Promise<ExecStream> {
    const pod = await this.podFor(sessionId);
    return this.client.execStream(pod.name, RUNNER_CONTAINER, argv);
  }

  /**
   * Runs `fn` serialised with the session's runs, copies and checkpoints: a checkpoint or a code action never sees
   * half an upload.
   */
  async exclusive<T>(sessionId: string, fn: () => Promise<T>): Promise<T> {
    const pod = await this.podFor(sessionId);
    return this.serialise(pod, fn);
  }

  /** The session's /workspace as a tar archive (see `workspace-tar.ts`: untrusted content). */
  async tarOut(sessionId: string): Promise<Buffer> {
    const pod = await this.podFor(sessionId);
    return this.withPod(pod, (target) => this.tarOutFrom(target));
  }

  /**
   * Unpacks `tar` into the session's /workspace; `replace` empties it first (deletions propagate), `dataOnly` leaves
   * only files, directories and links.
   */
  async tarIn(sessionId: string, tar: Buffer, options: TarInOptions): Promise<void> {
    const pod = await this.podFor(sessionId);
    return this.withPod(pod, (target) => this.tarInTo(target, tar, options));
  }

  /** `tarOut` of a target a caller holds (`withPod`). */
  tarOutFrom(target: RunTarget): Promise<Buffer> {
    const limits = this.options.limits.pooled;
    return tarOut(this.client, this.tarTarget(target), { maxBytes: limits.workspaceBytes + 64 * 2 ** 20 });
  }

  /** `tarIn` into a target a caller holds (`withPod`). */
  tarInTo(target: RunTarget, tar: Buffer, options: TarInOptions): Promise<void> {
    return tarIn(this.client, this.tarTarget(target), tar, options);
  }

  /** The pod as the target of a run: its current runner, and what a failure does to the session. */
  target(pod: SessionPod): RunTarget {
    const runner = pod.runner;
    const walkAfter = this.walkBounds;
    return {
      podName: pod.name,
      runner,
      workspace: pod.workspace,
      ...(walkAfter && {
        walkAfter,
        walked: (answer) => (pod.walked = { answer, op: pod.ops, bounds: JSON.stringify(walkAfter) }),
      }),
      gone: () => pod.released || this.closing,
      lost: async (err) => {
        pod.lostReason = err.message;
        runner.close();
        const loss = await this.recovery.inspectLoss(pod.name, runner.containerId);
        if (loss?.podGone) this.forget(pod);
        return loss;
      },
      hung: async () => {
        await this.recovery.killRunner(pod, 'it did not finish a run within its timeout and grace');
        throw new RunnerLostError(
          'RUNNER_UNRESPONSIVE',
          `the runner of the session's pod did not finish the run within its timeout + ${this.options.runnerGraceMs} ms; ` +
            `it was restarted (workspace and /tmp kept, kernels and background processes lost)`,
          { pod: pod.name },
        );
      },
      workspaceNotVisible: async (err) => {
        throw new SessionPodError(
          'WORKSPACE_NOT_VISIBLE',
          `the runner of pod ${pod.name} refused the run: /workspace is not the session's (${err.message})`,
        );
      },
      lostError: (err, loss) => this.lostError(pod, err, loss),
    };
  }

  /** Memory words for out-of-memory messages of the session pods. */
  get memoryWords(): string {
    return memoryWords(this.options.limits.pooled.memoryBytes, 'pod');
  }

  /** Restarts the session's runner (a box that stopped answering); the pod and its workspace stay. */
  async restartRunner(pod: SessionPod, why: string): Promise<void> {
    await this.recovery.killRunner(pod, why);
  }

  /** Keeps count of the kernels and processes living in the pod (the pod is never freed for idleness anyway). */
  pin(pod: SessionPod): () => void {
    pod.pins++;
    let done = false;
    return () => {
      if (!done) {
        done = true;
        pod.pins--;
      }
    };
  }

  /** The session ended: its pod, deleted next, no longer counts against `maxSessions`. */
  fence(sessionId: string): void {
    if (this.sessions.has(sessionId)) this.ending.add(sessionId);
  }

  /** Deletes the session's pod (killing whatever runs in it). Idempotent. */
  async release(sessionId: string): Promise<void> {
    const entry = this.sessions.get(sessionId);
    this.sessions.delete(sessionId);
    // Until its pod is out of `pods` (drop's first step), the session stays fenced off the count.
    const pod = await entry?.catch(() => undefined);
    try {
      if (pod) await this.drop(pod, 'released');
    } finally {
      this.ending.delete(sessionId);
    }
  }

  /**
   * Whose session pods this engine may adopt: its own id, engines of this host that died, and replicas handed over
   * with `adoptFrom`.
   */
  adoptable(engineId: string): boolean {
    return engineId === this.options.engineId || this.takenOver.has(engineId) || engineDeadHere(engineId);
  }

  /** A replica whose lease ran out and whose sessions this engine took over: its session pods may be adopted. */
  adoptFrom(engineId: string): void {
    this.takenOver.add(engineId);
  }

  /** Hears of each adopted pod before its session's `podFor` resolves (`KubernetesBoxes`: its kernels, processes). */
  onAdopted(listener: (adopted: AdoptedPod) => void): void {
    this.adoptionListener = listener;
  }

  /**
   * Deletes the claimed session pods of engines this one may adopt from whose session is not `known` (ended, or
   * unknown to this engine's state). Never throws.
   */
  reapOrphans(known: ReadonlySet<string>): Promise<string[]> {
    return this.adoption.reapOrphans(known, (owner) => this.adoptable(owner));
  }

  /** Every session pod this engine holds. */
  list(): SessionPodInfo[] {
    return [...this.pods.values()].map((p) => ({
      sessionId: p.sessionId,
      pod: p.name,
      image: p.image,
      warm: p.warm,
      alive: p.alive,
      busy: p.busy,
      ...(p.runnerPid !== undefined && { runnerPid: p.runnerPid }),
      workspace: p.workspace,
      claimedAt: p.claimedAt,
    }));
  }

  counts(): { claimed: number; claiming: number } {
    return { claimed: this.pods.size, claiming: this.claiming };
  }

  /** No new claims; every session pod is deleted. */
  async close(): Promise<void> {
    this.closing = true;
    const entries = [...this.sessions.values()];
    this.sessions.clear();
    this.ending.clear();
    const pods = await Promise.all(entries.map((e) => e.catch(() => undefined)));
    const held = pods.filter((p): p is SessionPod => p !== undefined);
    await Promise.allSettled(held.map((p) => this.drop(p, 'shutdown')));
  }

  private async drop(pod: SessionPod, why: string): Promise<void> {
    pod.released = true;
    pod.runner.close();
    if (this.pods.get(pod.sessionId) === pod) this.pods.delete(pod.sessionId);
    try {
      await this.launcher.remove(pod.name);
      this.logger.debug(`session ${pod.sessionId}: pod ${pod.name} deleted (${why})`);
    } catch (err) {
      throw new SandboxInternalError(
        'K8S_RELEASE',
        `could not delete pod ${pod.name} of session ${pod.sessionId}: ${(err as Error).message}`,
        { retriable: true, cause: err },
      );
    }
  }

  /** The pod is gone for good (evicted, deleted): the session starts over with its next use. */
  private forget(pod: SessionPod): void {
    void this.sessions.get(pod.sessionId)?.then((p) => {
      if (p === pod) this.sessions.delete(pod.sessionId);
    });
    if (this.pods.get(pod.sessionId) === pod) this.pods.delete(pod.sessionId);
    pod.released = true;
    void this.launcher.remove(pod.name).catch(() => undefined);
  }

  private async ensureRunner(pod: SessionPod): Promise<void> {
    if (pod.alive) return;
    if (pod.released) {
      throw new SessionPodError('SESSION_POD_LOST', `the pod of session ${pod.sessionId} was released`, {
        retriable: true,
      });
    }
    pod.recovering ??= this.recovery
      .recover(pod)
      .then(() => this.watchRunner(pod))
      .finally(() => (pod.recovering = undefined));
    try {
      await pod.recovering;
    } catch (err) {
      if (err instanceof SessionPodError && err.code === 'SESSION_POD_LOST') this.forget(pod);
      throw err;
    }
  }

  private lostError(pod: SessionPod, err: Error, loss: RunnerLoss | undefined): SandboxError {
    if (loss?.podGone) {
      return new SessionPodError(
        'SESSION_POD_LOST',
        `the pod of session ${pod.sessionId} went away during the run (${loss.podGone}); its workspace is lost. The ` +
          `session's next action gets a new pod with an empty workspace`,
        { cause: err, details: { pod: pod.name } },
      );
    }
    // After an OOM the runner survived, the instance's end reads `OOMKilled` whatever ended it: not a cause then.
    const reason = loss?.reason === 'OOMKilled' && pod.runner.oomSeen ? undefined : loss?.reason;
    const how = loss ? ` (exit ${loss.exitCode ?? '?'}${reason ? `, ${reason}` : ''})` : '';
    return new RunnerLostError(
      'RUNNER_LOST',
      `the runner in the session's pod stopped during the run${how}: ${err.message}. The kubelet restarts it in the ` +
        `same pod: the workspace and /tmp are kept, kernels and background processes are lost`,
      { pod: pod.name, ...(loss?.exitCode !== undefined && { exitCode: loss.exitCode }) },
      { cause: err },
    );
  }

  private tarTarget(target: RunTarget) {
    return { podName: target.podName, raw: (r: RawRunRequest) => this.runs.runRaw(target, r) };
  }

  private async claim(sessionId: string, image: string | undefined, adopt: boolean): Promise<SessionPod> {
    let holding = this.pods.size + this.claiming;
    for (const ended of this.ending) if (this.pods.has(ended)) holding--;
    if (holding >= this.options.maxSessions) {
      throw new PoolExhaustedError(
        'POOL_SESSIONS_EXHAUSTED',
        `${this.options.maxSessions} sessions already hold a pod; raise ${this.options.settingNames.maxSessions}`,
        { maxSessions: this.options.maxSessions },
      );
    }
    const img = image ?? this.options.image;
    if (!img)
      throw new SandboxUnavailableError(
        'no sandbox image configured for the Kubernetes tiers (kubernetes.image)',
      );
    this.claiming++;
    const t0 = this.clock.monotonic();
    try {
      const adopted = adopt ? await this.adoptPod(sessionId) : undefined;
      const pod =
        adopted ??
        ((img === this.options.image && (await this.claimWarm(sessionId, t0))) ||
          (await this.claimNew(sessionId, img)));
      if (this.closing) {
        await this.launcher.remove(pod.name).catch(() => undefined);
        throw new SandboxUnavailableError('the Kubernetes sandbox backend is shutting down');
      }
      this.pods.set(sessionId, pod);
      this.watchRunner(pod);
      this.lastClaimMs = this.clock.monotonic() - t0;
      this.logger.debug(
        `session ${sessionId} claimed pod ${pod.name} (${pod.warm ? 'warm' : 'new'}) in ${this.lastClaimMs.toFixed(1)} ms`,
      );
      return pod;
    } catch (err) {
      if (err instanceof SandboxError) throw err;
      throw new SandboxInternalError(
        'K8S_CLAIM',
        `could not give session ${sessionId} a pod: ${(err as Error).message}`,
        {
          retriable: true,
          cause: err,
        },
      );
    } finally {
      this.claiming--;
    }
  }

  /** The session's pod as another engine left it, adopted; its kernels and processes told to the listener. */
  private async adoptPod(sessionId: string): Promise<SessionPod | undefined> {
    const adopted = await this.adoption.adopt(sessionId, (owner) => this.adoptable(owner));
    if (!adopted) return undefined;
    try {
      this.adoptionListener?.(adopted);
    } catch (err) {
      this.logger.warn(`session ${sessionId}: its adopted kernels and processes: ${(err as Error).message}`);
    }
    return adopted.pod;
  }

  /** A warm pod, claimed and health-checked (its runner answers a ping); one that fails is deleted and the next tried. */
  private async claimWarm(sessionId: string, t0: number): Promise<SessionPod | undefined> {
    if (!this.warm) return undefined;
    const deadline = t0 + this.options.acquireTimeoutMs;
    for (;;) {
      const claimed = await this.warm.claim(sessionId, deadline);
      if (!claimed) return undefined;
      const { info } = claimed;
      try {
        const runner = await attachRunner(
          this.client,
          info.name,
          {
            startTimeoutMs: this.options.healthCheckTimeoutMs,
            ...(runnerStatus(info)?.containerId !== undefined && {
              containerId: runnerStatus(info)?.containerId,
            }),
          },
          this.clock,
        );
        const pid = runner.hello?.pid ?? claimed.runnerPid;
        return new SessionPod(
          sessionId,
          info.name,
          info.uid,
          this.options.image ?? '',
          runner,
          pid,
          this.clock.now(),
          true,
        );
      } catch (err) {
        this.logger.warn(
          `warm pod ${info.name} failed its health check (${(err as Error).message}); deleting it`,
        );
        await this.launcher.remove(info.name).catch(() => undefined);
        if (this.clock.monotonic() > deadline) return undefined;
      }
    }
  }

  /** A pod started for the session (no warm one, or a session image), labelled with it from the start. */
  private async claimNew(sessionId: string, image: string): Promise<SessionPod> {
    const limits = this.options.limits.pooled;
    const name = podName('session');
    const launched = await this.launcher.launch(
      sessionPodManifest({
        name,
        image,
        engineId: this.options.engineId,
        limits,
        options: this.options,
        state: 'claimed',
        sessionId,
        specHash: sessionPodSpecHash(image, limits, this.options),
      }),
    );
    const { info, runner } = launched;
    return new SessionPod(
      sessionId,
      info.name,
      info.uid,
      image,
      runner,
      runner.hello?.pid,
      this.clock.now(),
      false,
    );
  }

  /** Logs a runner that dies between runs; the next use re-attaches (the pod and its workspace stay). */
  private watchRunner(pod: SessionPod): void {
    const runner = pod.runner;
    void runner.connection.closed.then(() => {
      if (pod.released || this.closing || pod.runner !== runner || pod.busy > 0) return;
      this.logger.warn(
        `runner of session ${pod.sessionId}'s pod ${pod.name} went away while idle; the kubelet restarts it and the ` +
          `next use re-attaches${runner.diagnostics() ? ` (runner stderr: ${runner.diagnostics().slice(-300)})` : ''}`,
      );
    });
  }
}
