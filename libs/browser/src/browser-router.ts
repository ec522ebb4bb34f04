import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import * as path from 'node:path';
import {
  Inject,
  Injectable,
  Logger,
  type OnApplicationShutdown,
  type OnModuleInit,
  Optional,
} from '@nestjs/common';
import {
  type ActionError,
  criticalRiskDenial,
  type FileTouch,
  InvalidInputError,
  NO_RISK,
  type RiskAssessment,
} from '@switchyard/common';
import { FileOpError, PathRejectedError } from '@switchyard/workspace';
import {
  BROWSER_CLOCK,
  BROWSER_HOST_RESOLVER,
  BROWSER_OPTIONS,
  type BrowserClock,
  monotonicClock,
} from './browser.constants';
import { BrowserLaunchError, PageOperationError } from './browser.errors';
import type { ResolvedBrowserOptions } from './browser.options';
import {
  type BrowserActionOutput,
  type BrowserAvailability,
  type BrowserJob,
  type BrowserOutcome,
  type BrowserPrecheck,
  type BrowserRequest,
  needsDedicatedBrowser,
  requestUrl,
  type WaitUntil,
} from './browser.types';
import {
  BrowserDriver,
  type ContextSpec,
  type DriverBrowser,
  type DriverContext,
  type DriverPage,
  type DriverProbe,
  type GuardedRequest,
  type PageOperation,
  type PageResult,
} from './driver/browser-driver.port';
import { capData, clip, mimeTypeOf, safeName } from './browser-output';
import { type EgressRefusal, EgressProxy } from './egress/egress-proxy';
import { type Route, SessionBrowser } from './session-browser';
import { classifyIp, parseIp } from './url-policy/ip-address';
import { type HostResolver, type UrlRefusal, UrlPolicy } from './url-policy/url-policy';
import { WorkspaceFiles } from './workspace-files';

/** How long the driver's availability probe is reused. */
const PROBE_CACHE_MS = 1000;
/** Refusals listed in one action's output. */
const BLOCKED_IN_OUTPUT = 20;

/** A refusal the router itself decides (no room for another context). */
class ContextLimitError extends Error {}
/** A driver call that did not come back within its deadline. */
class DeadlineError extends Error {}
/** The action's signal fired (session ended, engine shutting down). */
class AbortedError extends Error {}

/** An upload's file, read from the workspace before the browser is touched. */
type Upload = Awaited<ReturnType<WorkspaceFiles['read']>>;

/** What `perform` hands to `finish`. */
interface Performed {
  tabId: string | undefined;
  result: PageResult;
  files: FileTouch[];
  artifacts?: BrowserActionOutput['artifacts'];
}

interface OpContext {
  sb: SessionBrowser;
  job: BrowserJob;
  timeoutMs: number;
  mark: number;
}

/**
 * Routes browser actions (SECURITY.md 13–14, issue 4). Two routes, chosen per action:
 *
 * - **shared**: one Chromium process, one isolated context per session (cookies and storage never cross
 *   sessions), for ordinary browsing;
 * - **dedicated**: a Chromium of the session's own, with a persistent profile and download directory, for
 *   actions that touch the session's files or ask for a profile (`needsFileAccess`, `persistProfile`,
 *   `upload`, `download`). A session moves there on its first such action (cookies and the current tab's
 *   URL carried over) and stays.
 *
 * Every context sends all its traffic through its own `EgressProxy` (the URL policy, enforced with pinned
 * addresses) and checks every request in a route interceptor first, so refusals are attributed to the
 * action that caused them. A session keeps its tabs between actions; its actions run one at a time. Contexts
 * are capped (least recently used idle ones are closed to make room) and closed when the session ends or
 * idles. A browser that dies is noticed, its sessions' actions report `BROWSER_CRASHED`, and the next
 * action launches a new one.
 */
@Injectable()
export class BrowserRouter implements OnModuleInit, OnApplicationShutdown {
  private readonly logger = new Logger('BrowserRouter');
  private readonly policy: UrlPolicy;
  private readonly sessions = new Map<string, SessionBrowser>();
  /** Actions queued or running per session; a session with any is never evicted or idled out. */
  private readonly active = new Map<string, number>();
  private readonly locks = new Map<string, Promise<void>>();
  private readonly opening = new Map<string, Promise<SessionBrowser>>();
  private readonly egressPorts = new Set<number>();
  /** Sessions that moved to a dedicated browser: they go back there after a crash, eviction or idling. */
  private readonly dedicatedSessions = new Set<string>();
  /** Unguessable per engine, so a page cannot forge the proxy's refusal mark. */
  private readonly denialHeader = `x-switchyard-egress-${randomBytes(8).toString('hex')}`;
  private readonly instance = randomBytes(4).toString('hex');
  private shared?: DriverBrowser;
  private sharedLaunch?: Promise<DriverBrowser>;
  private sweepTimer?: NodeJS.Timeout;
  private closing = false;
  private probed?: { at: number; value: DriverProbe };
  private readonly timing: ResolvedBrowserOptions['timing'];

  constructor(
    @Inject(BROWSER_OPTIONS) private readonly options: ResolvedBrowserOptions,
    private readonly driver: BrowserDriver,
    private readonly files: WorkspaceFiles,
    @Optional() @Inject(BROWSER_HOST_RESOLVER) resolver?: HostResolver,
    @Optional() @Inject(BROWSER_CLOCK) private readonly clock: BrowserClock = monotonicClock,
  ) {
    this.timing = options.timing;
    this.policy = new UrlPolicy({
      allowlist: options.allowlist,
      allowlistSetting: options.allowlistSetting,
      resolver,
      clock,
    });
  }

  async onModuleInit(): Promise<void> {
    if (!this.options.enabled) return;
    // Profiles and downloads of a previous engine run belong to sessions whose browsers are gone.
    await rm(this.options.stateDir, { recursive: true, force: true });
    await mkdir(this.options.sessionsDir, { recursive: true, mode: 0o700 });
    const every = Math.max(1000, Math.min(60_000, Math.floor(this.options.idleMs / 4)));
    this.sweepTimer = setInterval(() => void this.sweepIdle(), every);
    this.sweepTimer.unref();
    if (this.options.prelaunch && (await this.driver.probe()).available) {
      this.sharedBrowser().catch((err: unknown) =>
        this.logger.warn({ msg: 'could not prelaunch the shared browser', err: String(err) }),
      );
    }
  }

  /** Closes every context and browser. */
  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweepTimer);
    await Promise.allSettled([...this.opening.values()]);
    await Promise.allSettled([...this.sessions.values()].map((sb) => this.dispose(sb)));
    const shared = this.shared ?? (await this.sharedLaunch?.catch(() => undefined));
    this.shared = undefined;
    await shared?.close();
    if (this.options.enabled) await rm(this.options.stateDir, { recursive: true, force: true });
  }

  async availability(): Promise<BrowserAvailability> {
    if (!this.options.enabled)
      return { available: false, reason: 'the browser tier is disabled by configuration' };
    const probe = await this.probe();
    return {
      ...probe,
      shared: this.shared?.isConnected() ? 'running' : 'stopped',
      contexts: this.sessions.size,
      dedicated: this.dedicatedCount(),
      maxContexts: this.options.maxContexts,
    };
  }

  /** The driver's probe, reused for a second: every action asks. */
  private async probe(): Promise<DriverProbe> {
    const now = this.clock.now();
    if (this.probed && now - this.probed.at < PROBE_CACHE_MS) return this.probed.value;
    const value = await this.driver.probe();
    this.probed = { at: now, value };
    return value;
  }

  /** Open session contexts by route, for metrics. */
  stats(): { shared: number; dedicated: number } {
    const dedicated = this.dedicatedCount();
    return { shared: this.sessions.size - dedicated, dedicated };
  }

  /** Process ids of the live browsers (operations and tests). */
  processIds(): { shared?: number; dedicated: Record<string, number> } {
    const dedicated: Record<string, number> = {};
    for (const sb of this.sessions.values()) {
      const pid = sb.route === 'dedicated' ? sb.context.pid() : undefined;
      if (pid !== undefined) dedicated[sb.sessionId] = pid;
    }
    return { shared: this.shared?.isConnected() ? this.shared.pid() : undefined, dedicated };
  }

  /**
   * What can be decided before anything is recorded or opened: the risk of an `evaluate` script, and
   * refusals that need no DNS (scheme, address literals, `evaluate` disabled, critical risk). Throws
   * `InvalidInputError` for a URL that does not parse.
   */
  precheck(req: BrowserRequest): BrowserPrecheck {
    let risk: RiskAssessment = NO_RISK;
    if (req.op === 'evaluate') {
      if (this.options.assessScript) risk = this.options.assessScript(req.script);
      if (!this.options.evaluate) {
        return {
          risk,
          denial: {
            class: 'policy',
            code: 'EVALUATE_DISABLED',
            message: `evaluate (page JavaScript) is disabled; set ${this.options.evaluateSetting}=true to allow it`,
          },
        };
      }
      if (risk.level === 'critical') return { risk, denial: criticalRiskDenial(risk) };
    }
    const url = requestUrl(req);
    if (url !== undefined) {
      const verdict = this.policy.checkStatic(url);
      if (verdict && !verdict.allowed) {
        if (verdict.refusal.code === 'URL_INVALID')
          throw new InvalidInputError('url', verdict.refusal.reason);
        return { risk, denial: refusalError(url, verdict.refusal) };
      }
    }
    return { risk };
  }

  /**
   * Runs one action. Never rejects for what the page, the network or the policy did: those are outcomes.
   * Rejects with `PathRejectedError` for a workspace path that must not be used (the engine answers 400),
   * and for engine faults.
   */
  async execute(job: BrowserJob, signal?: AbortSignal): Promise<BrowserOutcome> {
    if (this.closing)
      return fault('error', {
        class: 'internal',
        code: 'SHUTTING_DOWN',
        message: 'the engine is shutting down',
      });
    const availability = await this.availability();
    if (!availability.available) {
      return fault('denied', {
        class: 'policy',
        code: 'TIER_UNAVAILABLE',
        message: `browser tier unavailable: ${availability.reason ?? 'unknown reason'}`,
      });
    }
    const pre = this.precheck(job.request);
    if (pre.denial) return fault('denied', pre.denial);
    const id = job.sessionId;
    this.active.set(id, (this.active.get(id) ?? 0) + 1);
    try {
      return await this.withLock(id, signal, () => this.runLocked(job, signal));
    } catch (err) {
      if (err instanceof AbortedError) return aborted(err);
      throw err;
    } finally {
      const n = (this.active.get(id) ?? 1) - 1;
      if (n <= 0) this.active.delete(id);
      else this.active.set(id, n);
    }
  }

  /** Closes the session's context or dedicated browser and removes its profile. Idempotent. */
  async releaseSession(sessionId: string): Promise<void> {
    await this.opening.get(sessionId)?.catch(() => undefined);
    const sb = this.sessions.get(sessionId);
    if (sb) await this.dispose(sb);
    this.dedicatedSessions.delete(sessionId);
    await rm(this.sessionDir(sessionId), { recursive: true, force: true }).catch(() => undefined);
  }

  /** Closes sessions' browsers that have been idle longer than `idleMs`. Called by a timer. */
  async sweepIdle(): Promise<void> {
    const now = this.clock.now();
    const idle = [...this.sessions.values()].filter(
      (sb) => !this.active.has(sb.sessionId) && now - sb.lastUsed >= this.options.idleMs,
    );
    for (const sb of idle) {
      this.logger.debug({ msg: 'closing idle browser context', sessionId: sb.sessionId, route: sb.route });
      await this.dispose(sb);
    }
  }

  // ------------------------------------------------------------------ one action

  private async runLocked(job: BrowserJob, signal?: AbortSignal): Promise<BrowserOutcome> {
    const req = job.request;
    const timeoutMs = Math.min(req.timeoutMs ?? this.options.defaultTimeoutMs, this.options.maxTimeoutMs);
    const url = requestUrl(req);
    if (url !== undefined) {
      // The same decision the interceptor and the proxy make, before the browser sees the URL at all.
      const verdict = await this.policy.checkUrl(url);
      if (!verdict.allowed) {
        if (verdict.refusal.code === 'DNS_FAILED') {
          return fault('failed', {
            class: 'validation',
            code: 'DNS_FAILED',
            message: verdict.refusal.reason,
          });
        }
        return fault('denied', refusalError(url, verdict.refusal));
      }
    }
    let upload: Upload | undefined;
    try {
      if (req.op === 'upload')
        upload = await this.files.read(job.workspaceDir, req.path, this.options.maxArtifactBytes);
    } catch (err) {
      if (err instanceof FileOpError)
        return fault('failed', { class: err.errorClass, code: err.code, message: err.message });
      throw err;
    }

    let sb: SessionBrowser;
    try {
      sb = await this.abortable(this.sessionBrowser(job, needsDedicatedBrowser(req)), signal);
    } catch (err) {
      if (err instanceof ContextLimitError) {
        return fault('denied', { class: 'limit', code: 'BROWSER_CONTEXT_LIMIT', message: err.message });
      }
      if (err instanceof BrowserLaunchError) {
        return fault('error', { class: 'spawn', code: err.code, message: err.message });
      }
      if (err instanceof PageOperationError || err instanceof DeadlineError) {
        return fault('error', {
          class: 'internal',
          code: 'BROWSER_UNRESPONSIVE',
          message: `the browser did not open a context: ${err.message}`,
        });
      }
      throw err;
    }
    sb.lastUsed = this.clock.now();
    const ctx: OpContext = { sb, job, timeoutMs, mark: sb.mark };
    let tabId: string | undefined;
    try {
      const done = await this.perform(ctx, upload, signal);
      tabId = done.tabId;
      return await this.finish(ctx, done);
    } catch (err) {
      tabId ??= sb.current;
      return await this.failure(ctx, err, tabId);
    } finally {
      sb.lastUsed = this.clock.now();
    }
  }

  /** Runs the op on the session's browser; tab ops are the router's own. */
  private async perform(
    ctx: OpContext,
    upload: Upload | undefined,
    signal?: AbortSignal,
  ): Promise<Performed> {
    const { sb, job, timeoutMs } = ctx;
    const req = job.request;
    if (req.op === 'new_tab') {
      const page = await this.bounded(sb.context.newPage(), this.timing.housekeepingMs, signal);
      const id = this.register(sb, page);
      sb.current = id;
      const result =
        req.url !== undefined
          ? await this.run(
              page,
              { op: 'navigate', url: req.url, waitUntil: req.waitUntil ?? 'load' },
              timeoutMs,
              signal,
            )
          : {};
      return { tabId: id, result, files: [] };
    }
    if (req.op === 'switch_tab') {
      this.syncTabs(sb);
      const page = sb.tabs.get(req.tabId);
      if (!page) {
        const open = [...sb.tabs.keys()].join(', ') || 'none';
        throw new PageOperationError(
          'other',
          'TAB_NOT_FOUND',
          `no open tab ${req.tabId}; open tabs: ${open}`,
        );
      }
      sb.current = req.tabId;
      await page.bringToFront();
      return { tabId: req.tabId, result: {}, files: [] };
    }
    if (req.op === 'close_tab') {
      this.syncTabs(sb);
      const id = req.tabId ?? sb.current;
      const page = id === undefined ? undefined : sb.tabs.get(id);
      if (!page || id === undefined) {
        throw new PageOperationError('other', 'TAB_NOT_FOUND', `no open tab ${req.tabId ?? '(current)'}`);
      }
      await this.bounded(page.close(), this.timing.housekeepingMs, signal);
      sb.dropTab(id);
      return { tabId: sb.current, result: { data: { closed: id } }, files: [] };
    }
    const tabId = await this.currentTab(sb, signal);
    const page = sb.tabs.get(tabId)!;
    const op = this.pageOperation(req, upload);
    const result = await this.run(page, op, timeoutMs, signal);
    const files: FileTouch[] = [];
    let artifacts: BrowserActionOutput['artifacts'];
    if (upload) files.push({ path: upload.realRel, access: 'read' });
    if (result.bytes && (req.op === 'screenshot' || req.op === 'pdf' || req.op === 'download')) {
      let target = req.path;
      if (req.op === 'download' && target.endsWith('/')) target += safeName(result.suggestedName);
      if (result.bytes.length > this.options.maxArtifactBytes) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `the ${req.op} is ${result.bytes.length} bytes, over the ${this.options.maxArtifactBytes}-byte artifact cap`,
        );
      }
      const realRel = await this.files.write(job.sessionId, job.workspaceDir, target, result.bytes);
      files.push({ path: realRel, access: 'write' });
      artifacts = [
        {
          path: realRel,
          bytes: result.bytes.length,
          mimeType: result.mimeType ?? 'application/octet-stream',
        },
      ];
    }
    return { tabId, result, files, artifacts };
  }

  private pageOperation(req: BrowserRequest, upload?: Upload): PageOperation {
    const wait = (w?: WaitUntil): WaitUntil => w ?? 'load';
    switch (req.op) {
      case 'navigate':
        return { op: 'navigate', url: req.url, waitUntil: wait(req.waitUntil) };
      case 'back':
      case 'forward':
      case 'reload':
        return { op: req.op, waitUntil: wait(req.waitUntil) };
      case 'click':
        return { op: 'click', selector: req.selector, button: req.button, clickCount: req.clickCount };
      case 'fill':
        return { op: 'fill', selector: req.selector, value: req.value };
      case 'type':
        return { op: 'type', selector: req.selector, text: req.text, delayMs: req.delayMs };
      case 'press':
        return { op: 'press', key: req.key, selector: req.selector };
      case 'select':
        return { op: 'select', selector: req.selector, values: req.values };
      case 'hover':
        return { op: 'hover', selector: req.selector };
      case 'check':
        return { op: 'check', selector: req.selector, checked: req.checked ?? true };
      case 'wait_for':
        return {
          op: 'wait_for',
          selector: req.selector,
          state: req.state,
          text: req.text,
          url: req.url,
          loadState: req.loadState,
        };
      case 'extract':
        return {
          op: 'extract',
          mode: req.mode,
          selector: req.selector,
          maxItems: this.options.maxExtractItems,
        };
      case 'screenshot':
        return { op: 'screenshot', fullPage: req.fullPage ?? false, selector: req.selector };
      case 'pdf':
        return { op: 'pdf' };
      case 'download':
        return { op: 'download', selector: req.selector, maxBytes: this.options.maxArtifactBytes };
      case 'upload':
        return {
          op: 'upload',
          selector: req.selector,
          file: { name: upload!.name, mimeType: mimeTypeOf(upload!.name), buffer: upload!.buffer },
        };
      case 'evaluate':
        return { op: 'evaluate', script: req.script };
      case 'new_tab':
      case 'switch_tab':
      case 'close_tab':
        throw new Error(`${req.op} is not a page operation`);
    }
  }

  /**
   * One driver call under a hard deadline (its own timeout plus a grace period). A call that overruns it
   * leaves a tab that may be hung: `failure` checks and drops it, so the session is never wedged.
   */
  private async run(
    page: DriverPage,
    op: PageOperation,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<PageResult> {
    // evaluate and pdf have no timeout of their own: the deadline is theirs, without grace.
    const grace = op.op === 'evaluate' || op.op === 'pdf' ? 0 : this.timing.deadlineGraceMs;
    return this.bounded(page.perform(op, timeoutMs), timeoutMs + grace, signal);
  }

  /** Builds the successful (or policy-refused) outcome. */
  private async finish(ctx: OpContext, done: Performed): Promise<BrowserOutcome> {
    const { sb } = ctx;
    const opened = this.syncTabs(sb);
    const refusals = sb.since(ctx.mark);
    const output = await this.output(ctx, done.tabId, {
      title: done.result.title,
      data: capData(done.result.data, this.options.outputMaxBytes),
      artifacts: done.artifacts,
      openedTabs: opened,
    });
    if (done.result.egressDenied) {
      // The main document is the proxy's refusal (a redirect hop to a refused host, typically).
      const r = refusals.filter((e) => e.source === 'proxy').pop();
      return {
        status: 'denied',
        output,
        error: {
          class: 'policy',
          code: r?.code ?? 'ADDRESS_REFUSED',
          message: r ? `refused ${r.url}: ${r.reason}` : 'the navigation was refused by the URL policy',
        },
        files: done.files,
      };
    }
    return { status: 'succeeded', output, files: done.files };
  }

  /** Maps a failed op to its outcome. */
  private async failure(ctx: OpContext, err: unknown, tabId: string | undefined): Promise<BrowserOutcome> {
    const { sb, job, timeoutMs } = ctx;
    const op = job.request.op;
    if (err instanceof PathRejectedError) throw err;
    if (err instanceof AbortedError) return aborted(err);
    if (err instanceof FileOpError) {
      return this.withOutput(ctx, tabId, {
        status: 'failed',
        error: { class: err.errorClass, code: err.code, message: err.message },
      });
    }
    if (
      sb.dead ||
      (err instanceof PageOperationError && err.failure === 'closed' && (await this.browserGone(sb)))
    ) {
      await this.dispose(sb);
      return {
        status: 'error',
        error: {
          class: 'internal',
          code: 'BROWSER_CRASHED',
          message:
            `the ${sb.route} browser exited during ${op} (crash or kill); its tabs are lost. ` +
            'The next action starts a new browser.',
        },
        files: [],
      };
    }
    if (err instanceof DeadlineError || (err instanceof PageOperationError && err.failure === 'timeout')) {
      const dropped = tabId !== undefined && (await this.dropIfHung(sb, tabId));
      const why =
        err instanceof PageOperationError ? err.message : `${op} did not finish within ${timeoutMs} ms`;
      return this.withOutput(ctx, dropped ? undefined : tabId, {
        status: 'timed_out',
        error: {
          class: 'timeout',
          code: 'TIMEOUT',
          message: dropped ? `${why}; the tab stopped responding and was closed` : why,
        },
      });
    }
    if (err instanceof PageOperationError) {
      const refusals = sb.since(ctx.mark);
      // Only the action's own document counts: a refused image does not make a failed navigation a refusal.
      const causes = refusals.filter((e) => e.mainFrameNavigation || e.source === 'proxy');
      if (err.failure === 'navigation' && causes.length > 0) {
        const r = causes.find((e) => e.mainFrameNavigation) ?? causes[causes.length - 1];
        return this.withOutput(ctx, tabId, {
          status: 'denied',
          error: { class: 'policy', code: r.code, message: `refused ${r.url}: ${r.reason}` },
        });
      }
      if (err.failure === 'closed') {
        return this.withOutput(ctx, undefined, {
          status: 'failed',
          error: {
            class: 'validation',
            code: 'TAB_CLOSED',
            message: `the tab closed during ${op}: ${err.message}`,
          },
        });
      }
      const errorClass = err.failure === 'limit' ? 'limit' : 'validation';
      return this.withOutput(ctx, tabId, {
        status: 'failed',
        error: { class: errorClass, code: err.code, message: err.message },
      });
    }
    throw err;
  }

  private async withOutput(
    ctx: OpContext,
    tabId: string | undefined,
    outcome: { status: BrowserOutcome['status']; error: ActionError },
  ): Promise<BrowserOutcome> {
    this.syncTabs(ctx.sb);
    const output = ctx.sb.dead ? undefined : await this.output(ctx, tabId, {}).catch(() => undefined);
    return { ...outcome, ...(output && { output }), files: [] };
  }

  private async output(
    ctx: OpContext,
    tabId: string | undefined,
    extra: Pick<BrowserActionOutput, 'data' | 'artifacts' | 'openedTabs'> & { title?: string },
  ): Promise<BrowserActionOutput> {
    const { sb } = ctx;
    const page = tabId === undefined ? undefined : sb.tabs.get(tabId);
    const blocked = sb
      .since(ctx.mark)
      .slice(-BLOCKED_IN_OUTPUT)
      .map(({ url, reason }) => ({ url, reason }));
    const tabs = [...sb.tabs.entries()].map(([id, p]) => ({ id, url: p.url() }));
    const data = ['new_tab', 'switch_tab', 'close_tab'].includes(ctx.job.request.op)
      ? { ...extra.data, tabs }
      : extra.data;
    return {
      tabId: page ? tabId! : null,
      url: clip(page?.url() ?? '', 8192),
      title: clip(page ? (extra.title ?? (await page.title(this.timing.probeMs))) : '', 1024),
      status: page?.status() ?? null,
      route: sb.route,
      ...(data && { data }),
      ...(extra.artifacts && { artifacts: extra.artifacts }),
      ...(blocked.length > 0 && { blocked }),
      ...(extra.openedTabs && extra.openedTabs.length > 0 && { openedTabs: extra.openedTabs }),
    };
  }

  // ------------------------------------------------------------------ tabs

  private register(sb: SessionBrowser, page: DriverPage): string {
    const known = sb.tabId(page);
    if (known) return known;
    const id = `tab_${sb.nextTab++}`;
    sb.tabs.set(id, page);
    return id;
  }

  /** Drops closed tabs and adopts pages the browser opened by itself (popups). Returns the new tab ids. */
  private syncTabs(sb: SessionBrowser): string[] {
    if (sb.dead) return [];
    for (const [id, p] of sb.tabs) if (p.isClosed()) sb.tabs.delete(id);
    const opened: string[] = [];
    for (const p of sb.context.pages()) {
      if (!p.isClosed() && sb.tabId(p) === undefined) opened.push(this.register(sb, p));
    }
    if (sb.current !== undefined && !sb.tabs.has(sb.current)) sb.current = [...sb.tabs.keys()].pop();
    return opened;
  }

  private async currentTab(sb: SessionBrowser, signal?: AbortSignal): Promise<string> {
    this.syncTabs(sb);
    if (sb.current !== undefined && sb.tabs.has(sb.current)) return sb.current;
    const last = [...sb.tabs.keys()].pop();
    if (last !== undefined) {
      sb.current = last;
      return last;
    }
    const page = await this.bounded(sb.context.newPage(), this.timing.housekeepingMs, signal);
    sb.current = this.register(sb, page);
    return sb.current;
  }

  /**
   * Whether the browser behind `sb` is gone. Playwright may reject the call in flight a moment before it
   * reports the disconnection, so a `closed` failure waits a little (`timing.crashWaitMs`) for the report.
   */
  private async browserGone(sb: SessionBrowser): Promise<boolean> {
    for (let waited = 0; ; waited += 50) {
      if (sb.dead) return true;
      if (sb.route === 'shared' && !this.shared?.isConnected()) return true;
      if (waited >= this.timing.crashWaitMs) return false;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  /** After a timeout: a tab whose renderer no longer answers is closed (or its whole context, if that hangs). */
  private async dropIfHung(sb: SessionBrowser, tabId: string): Promise<boolean> {
    const page = sb.tabs.get(tabId);
    if (!page || page.isClosed()) return false;
    if (await page.responsive(this.timing.probeMs)) return false;
    this.logger.warn({ msg: 'closing an unresponsive tab', sessionId: sb.sessionId, tabId });
    sb.dropTab(tabId);
    try {
      await this.bounded(page.close(), this.timing.probeMs);
    } catch {
      await this.dispose(sb);
    }
    return true;
  }

  // ------------------------------------------------------------------ contexts and browsers

  private async sessionBrowser(job: BrowserJob, wantDedicated: boolean): Promise<SessionBrowser> {
    let sb = this.sessions.get(job.sessionId);
    if (sb?.dead) {
      await this.dispose(sb);
      sb = undefined;
    }
    if (sb && wantDedicated && sb.route === 'shared') return this.promote(sb, job);
    if (sb) return sb;
    return this.open(
      job,
      wantDedicated || this.dedicatedSessions.has(job.sessionId) ? 'dedicated' : 'shared',
    );
  }

  private async open(job: BrowserJob, route: Route): Promise<SessionBrowser> {
    const pending = this.opening.get(job.sessionId);
    if (pending) return pending;
    const opening = this.doOpen(job, route).finally(() => this.opening.delete(job.sessionId));
    this.opening.set(job.sessionId, opening);
    return opening;
  }

  private async doOpen(job: BrowserJob, route: Route): Promise<SessionBrowser> {
    await this.makeRoom(job.sessionId, route);
    // The proxy and the interceptor start before the session object exists; they log into it once it does.
    const holder: { sb?: SessionBrowser } = {};
    const egress = await EgressProxy.start({
      checkHost: (host) => this.policy.checkHost(host),
      vetoAddress: (address, port) => this.vetoAddress(address, port),
      denialHeader: this.denialHeader,
      onRefusal: (r: EgressRefusal) =>
        holder.sb?.record({
          url: r.via === 'HTTP' ? r.target : `${r.via === 'CONNECT' ? 'tunnel' : 'upgrade'} to ${r.target}`,
          reason: r.refusal.reason,
          code: r.refusal.code,
          source: 'proxy',
          mainFrameNavigation: false,
        }),
    });
    this.egressPorts.add(egress.port);
    const spec: ContextSpec = {
      proxyServer: egress.url,
      egressDenialHeader: this.denialHeader,
      acceptDownloads: route === 'dedicated',
      requestGuard: (r) => this.guard(holder.sb, r),
    };
    let context: DriverContext;
    try {
      if (route === 'shared') {
        const browser = await this.sharedBrowser();
        context = await this.bounded(browser.newContext(spec), this.timing.housekeepingMs);
      } else {
        const dir = this.sessionDir(job.sessionId);
        const userDataDir = path.join(dir, 'profile');
        const downloadsDir = path.join(dir, 'downloads');
        await mkdir(userDataDir, { recursive: true, mode: 0o700 });
        await mkdir(downloadsDir, { recursive: true, mode: 0o700 });
        context = await this.driver.launchDedicated({
          ...spec,
          label: `dedicated-${this.instance}-${job.sessionId}`,
          userDataDir,
          downloadsDir,
        });
      }
    } catch (err) {
      this.egressPorts.delete(egress.port);
      await egress.close();
      throw err;
    }
    const sb = new SessionBrowser(job.sessionId, route, context, egress, this.clock.now());
    holder.sb = sb;
    const created = sb;
    context.onClose(() => {
      if (created.disposed) return;
      created.dead = true;
      if (!this.closing) {
        this.logger.warn({ msg: 'browser context lost', sessionId: created.sessionId, route: created.route });
      }
    });
    // A persistent context starts with a blank tab: adopt it as the session's first.
    for (const p of context.pages()) this.register(sb, p);
    sb.current = [...sb.tabs.keys()][0];
    this.sessions.set(job.sessionId, sb);
    if (route === 'dedicated') this.dedicatedSessions.add(job.sessionId);
    this.logger.debug({ msg: 'browser context opened', sessionId: job.sessionId, route });
    return sb;
  }

  /**
   * Moves a session from the shared browser to a dedicated one: cookies and the current tab's URL come
   * along (local storage and page state do not).
   */
  private async promote(sb: SessionBrowser, job: BrowserJob): Promise<SessionBrowser> {
    const cookies = await this.bounded(sb.context.cookies(), this.timing.housekeepingMs).catch(() => []);
    const currentId = sb.current;
    const currentUrl = currentId ? sb.tabs.get(currentId)?.url() : undefined;
    const nextTab = sb.nextTab;
    await this.dispose(sb);
    const next = await this.open(job, 'dedicated');
    await this.bounded(next.context.addCookies(cookies), this.timing.housekeepingMs).catch((err: unknown) =>
      this.logger.warn({ msg: 'cookies not carried to the dedicated browser', err: String(err) }),
    );
    if (currentId !== undefined) {
      // The dedicated browser's first tab takes over the id of the tab the agent was on.
      const first = next.current !== undefined ? next.tabs.get(next.current) : undefined;
      if (first) {
        next.tabs.delete(next.current!);
        next.tabs.set(currentId, first);
        next.current = currentId;
        next.nextTab = Math.max(nextTab, next.nextTab);
        if (currentUrl && /^https?:/i.test(currentUrl)) {
          await first
            .perform({ op: 'navigate', url: currentUrl, waitUntil: 'load' }, this.options.defaultTimeoutMs)
            .catch(() => undefined);
        }
      }
    }
    this.logger.debug({ msg: 'session moved to a dedicated browser', sessionId: sb.sessionId });
    return next;
  }

  /** Closes least recently used idle contexts until one more of `route` fits; refuses when none can go. */
  private async makeRoom(sessionId: string, route: Route): Promise<void> {
    const fits = () =>
      this.sessions.size < this.options.maxContexts &&
      (route === 'shared' || this.dedicatedCount() < this.options.maxDedicated);
    while (!fits()) {
      const dedicatedFull = route === 'dedicated' && this.dedicatedCount() >= this.options.maxDedicated;
      const victim = [...this.sessions.values()]
        .filter((s) => s.sessionId !== sessionId && !this.active.has(s.sessionId))
        .filter((s) => !dedicatedFull || s.route === 'dedicated')
        .sort((a, b) => a.lastUsed - b.lastUsed)[0];
      if (!victim) {
        const cap = dedicatedFull
          ? `${this.options.maxDedicated} dedicated browsers`
          : `${this.options.maxContexts} browser contexts`;
        throw new ContextLimitError(`all ${cap} are in use by running actions; retry when one finishes`);
      }
      this.logger.log({
        msg: 'closing least recently used browser context to make room',
        sessionId: victim.sessionId,
      });
      await this.dispose(victim);
    }
  }

  private dedicatedCount(): number {
    return [...this.sessions.values()].filter((s) => s.route === 'dedicated').length;
  }

  private async sharedBrowser(): Promise<DriverBrowser> {
    if (this.shared?.isConnected()) return this.shared;
    this.sharedLaunch ??= this.driver
      .launchShared(`shared-${this.instance}`)
      .then((browser) => {
        this.shared = browser;
        browser.onDisconnected(() => this.sharedGone(browser));
        this.logger.log({ msg: 'shared browser started', pid: browser.pid() });
        return browser;
      })
      .finally(() => {
        this.sharedLaunch = undefined;
      });
    return this.sharedLaunch;
  }

  private sharedGone(browser: DriverBrowser): void {
    if (this.shared !== browser) return;
    this.shared = undefined;
    for (const sb of this.sessions.values()) if (sb.route === 'shared') sb.dead = true;
    if (!this.closing) this.logger.warn({ msg: 'shared browser exited; relaunching at the next action' });
  }

  /** Closes a session's context (or dedicated browser) and its proxy, and forgets it. Idempotent. */
  private async dispose(sb: SessionBrowser): Promise<void> {
    if (this.sessions.get(sb.sessionId) === sb) this.sessions.delete(sb.sessionId);
    if (sb.disposed) return;
    sb.disposed = true;
    await this.bounded(sb.context.close(), this.timing.housekeepingMs).catch((err: unknown) =>
      this.logger.warn({
        msg: 'browser context did not close cleanly',
        sessionId: sb.sessionId,
        err: String(err),
      }),
    );
    this.egressPorts.delete(sb.egress.port);
    await sb.egress.close();
  }

  private sessionDir(sessionId: string): string {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(sessionId))
      throw new InvalidInputError('sessionId', 'invalid session id');
    return path.join(this.options.sessionsDir, sessionId);
  }

  // ------------------------------------------------------------------ policy hooks

  /** The interceptor's check of one request; refusals are logged against the session. */
  private async guard(sb: SessionBrowser | undefined, r: GuardedRequest): Promise<string | undefined> {
    const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(r.url)?.[1]?.toLowerCase();
    if (scheme === 'data' || scheme === 'blob' || scheme === 'about') return undefined;
    const verdict = this.policy.checkStatic(r.url) ?? (await this.policy.checkUrl(r.url));
    // A name that does not resolve is left to the proxy, which answers it with a 502.
    if (verdict.allowed || verdict.refusal.code === 'DNS_FAILED') return undefined;
    sb?.record({
      url: clip(r.url, 500),
      reason: verdict.refusal.reason,
      code: verdict.refusal.code,
      source: 'guard',
      mainFrameNavigation: r.navigation && r.mainFrame,
    });
    return verdict.refusal.reason;
  }

  /** Loopback ports of the engine's own proxies are never a destination, allowlisted or not. */
  private vetoAddress(address: string, port: number): string | undefined {
    const ip = parseIp(address);
    if (ip && classifyIp(ip).category === 'loopback' && this.egressPorts.has(port)) {
      return "it is one of the engine's own egress proxies";
    }
    return undefined;
  }

  // ------------------------------------------------------------------ plumbing

  /** Serializes a session's actions. */
  private async withLock<T>(
    sessionId: string,
    signal: AbortSignal | undefined,
    fn: () => Promise<T>,
  ): Promise<T> {
    const previous = this.locks.get(sessionId) ?? Promise.resolve();
    let release!: () => void;
    const mine = new Promise<void>((resolve) => (release = resolve));
    const chained = previous.then(() => mine);
    this.locks.set(sessionId, chained);
    try {
      await this.abortable(previous, signal);
      return await fn();
    } finally {
      release();
      if (this.locks.get(sessionId) === chained) this.locks.delete(sessionId);
    }
  }

  /** `p`, unless `signal` fires first. */
  private async abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
    if (!signal) return p;
    if (signal.aborted) throw new AbortedError(reasonOf(signal));
    let onAbort!: () => void;
    const stop = new Promise<never>((_, reject) => {
      onAbort = () => reject(new AbortedError(reasonOf(signal)));
      signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([p, stop]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** `p` within `ms` (DeadlineError after), and abortable. The timer never outlives the call. */
  private async bounded<T>(p: Promise<T>, ms: number, signal?: AbortSignal): Promise<T> {
    let timer: NodeJS.Timeout | undefined;
    const deadline = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineError(`no answer from the browser within ${ms} ms`)), ms);
    });
    p.catch(() => undefined); // a late rejection after the deadline is not unhandled
    try {
      return await this.abortable(Promise.race([p, deadline]), signal);
    } finally {
      clearTimeout(timer);
    }
  }
}

function fault(status: BrowserOutcome['status'], error: ActionError): BrowserOutcome {
  return { status, error, files: [] };
}

function aborted(err: Error): BrowserOutcome {
  return fault('error', {
    class: 'internal',
    code: 'ABORTED',
    message: `the action was stopped: ${err.message}`,
  });
}

function reasonOf(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : typeof r === 'string' ? r : 'aborted';
}

function refusalError(url: string, refusal: UrlRefusal): ActionError {
  return {
    class: 'policy',
    code: refusal.code,
    message: `refused ${clip(url, 300).trim()}: ${refusal.reason}`,
  };
}
