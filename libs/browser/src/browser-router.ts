import { Inject, Injectable, type OnApplicationShutdown, type OnModuleInit, Optional } from '@nestjs/common';
import {
  CLOCK,
  type Clock,
  criticalRiskDenial,
  NO_RISK,
  type RiskAssessment,
  systemClock,
} from '@switchyard/common';
import { FileOpError } from '@switchyard/workspace';
import { BROWSER_HOST_RESOLVER, BROWSER_OPTIONS, BROWSER_SESSION_PORTS } from './browser.constants';
import { BrowserLaunchError, PageOperationError } from './browser.errors';
import type { ResolvedBrowserOptions } from './browser.options';
import {
  type BrowserAvailability,
  type BrowserJob,
  type BrowserOutcome,
  type BrowserPrecheck,
  type BrowserRequest,
  type BrowserView,
  needsDedicatedBrowser,
  requestUrl,
} from './browser.types';
import { BrowserDriver, type DriverProbe } from './driver/browser-driver.port';
import { aborted, fault } from './browser-output';
import { BrowserPool, ContextLimitError } from './browser-pool';
import { AbortedError, abortable, DeadlineError } from './deadlines';
import { PageRunner, type Upload } from './page-runner';
import { SessionBrowser } from './session-browser';
import { SessionLock } from './session-lock';
import type { SessionPortDialer } from './session-ports.port';
import { SessionTabs } from './session-tabs';
import { UrlGuard } from './url-guard';
import { type HostResolver, UrlPolicy } from '@switchyard/network';
import { WorkspaceFiles } from './workspace-files';

/** How long a look at a session's tab (`view`) may take before it is given up. */
const VIEW_TIMEOUT_MS = 2000;
/** How long the driver's availability probe is reused. */
const PROBE_CACHE_MS = 1000;

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
 * action that caused them. With the engine's `SessionPortDialer`, `localhost` in a page is the session's own
 * sandbox: the proxy opens those ports through it, and nothing on the engine host. A session keeps its tabs
 * between actions; its actions run one at a time. Contexts are capped (least recently used idle ones are
 * closed to make room) and closed when the session ends or idles. A browser that dies is noticed, its
 * sessions' actions report `BROWSER_CRASHED`, and the next action launches a new one.
 *
 * The router is the port; behind it, and owned by it: the `BrowserPool` (every browser, context and egress
 * proxy, closed at shutdown), the `PageRunner` (one action on a session's browser), the `UrlGuard` and the
 * `SessionLock`. The idle sweep timer is the router's own.
 */
@Injectable()
export class BrowserRouter implements OnModuleInit, OnApplicationShutdown {
  private readonly guard: UrlGuard;
  private readonly lock = new SessionLock();
  private readonly pool: BrowserPool;
  private readonly runner: PageRunner;
  private sweepTimer?: NodeJS.Timeout;
  private closing = false;
  private probed?: { at: number; value: DriverProbe };

  constructor(
    @Inject(BROWSER_OPTIONS) private readonly options: ResolvedBrowserOptions,
    private readonly driver: BrowserDriver,
    private readonly files: WorkspaceFiles,
    @Optional() @Inject(BROWSER_HOST_RESOLVER) resolver?: HostResolver,
    @Optional() @Inject(CLOCK) private readonly clock: Clock = systemClock,
    @Optional() @Inject(BROWSER_SESSION_PORTS) ports?: SessionPortDialer,
  ) {
    this.guard = new UrlGuard(
      new UrlPolicy({
        allowlist: options.allowlist,
        allowlistSetting: options.allowlistSetting,
        resolver,
        clock,
      }),
      ports,
    );
    this.pool = new BrowserPool(options, driver, this.guard, this.lock, clock);
    this.runner = new PageRunner(options, files, this.pool, new SessionTabs(options.timing, this.pool));
  }

  async onModuleInit(): Promise<void> {
    if (!this.options.enabled) return;
    await this.pool.start();
    const every = Math.max(1000, Math.min(60_000, Math.floor(this.options.idleMs / 4)));
    this.sweepTimer = setInterval(() => void this.sweepIdle(), every);
    this.sweepTimer.unref();
    if (this.options.prelaunch && (await this.driver.probe()).available) this.pool.prelaunch();
  }

  /** Refuses new actions, stops the idle sweep and closes every context and browser. */
  async onApplicationShutdown(): Promise<void> {
    this.closing = true;
    clearInterval(this.sweepTimer);
    await this.pool.close();
  }

  async availability(): Promise<BrowserAvailability> {
    if (!this.options.enabled)
      return { available: false, reason: 'the browser tier is disabled by configuration' };
    const probe = await this.probe();
    const { contexts, dedicated } = this.pool.counts();
    return {
      ...probe,
      shared: this.pool.sharedRunning() ? 'running' : 'stopped',
      contexts,
      dedicated,
      maxContexts: this.options.maxContexts,
    };
  }

  /** Open session contexts by route, for metrics. */
  stats(): { shared: number; dedicated: number } {
    const { contexts, dedicated } = this.pool.counts();
    return { shared: contexts - dedicated, dedicated };
  }

  /** Process ids of the live browsers (operations and tests). */
  processIds(): { shared?: number; dedicated: Record<string, number> } {
    return this.pool.processIds();
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
    const denial = url !== undefined ? this.guard.staticDenial(url) : undefined;
    return denial ? { risk, denial } : { risk };
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
    try {
      return await this.lock.run(job.sessionId, signal, () => this.runLocked(job, signal));
    } catch (err) {
      if (err instanceof AbortedError) return aborted(err);
      throw err;
    }
  }

  /**
   * The session's current tab as it looks now, for a person watching: a viewport JPEG, its URL and title. Read only
   * and out of band: no action, no session lock (a look does not wait for a running action, and changes nothing it
   * could see), no browser opened. Undefined when the session has no open browser or tab, or the page does not paint
   * within the browser's short timeout.
   */
  async view(sessionId: string): Promise<BrowserView | undefined> {
    const sb = this.pool.existing(sessionId);
    const tab = sb?.current;
    const page = tab !== undefined ? sb?.tabs.get(tab) : undefined;
    if (!sb || tab === undefined || !page || page.isClosed()) return undefined;
    const [image, title] = await Promise.all([
      page.peek(VIEW_TIMEOUT_MS),
      page.title(VIEW_TIMEOUT_MS).catch(() => ''),
    ]);
    return image ? { image, url: page.url(), title, tab } : undefined;
  }

  /** Closes the session's context or dedicated browser and removes its profile. Idempotent. */
  async releaseSession(sessionId: string): Promise<void> {
    await this.pool.release(sessionId);
  }

  /** Closes sessions' browsers that have been idle longer than `idleMs`. Called by a timer. */
  async sweepIdle(): Promise<void> {
    await this.pool.closeIdle(this.options.idleMs);
  }

  /** The driver's probe, reused for a second: every action asks. */
  private async probe(): Promise<DriverProbe> {
    const now = this.clock.monotonic();
    if (this.probed && now - this.probed.at < PROBE_CACHE_MS) return this.probed.value;
    const value = await this.driver.probe();
    this.probed = { at: now, value };
    return value;
  }

  /** One action, its session's lock held: the checks that need I/O, the session's browser, the run. */
  private async runLocked(job: BrowserJob, signal?: AbortSignal): Promise<BrowserOutcome> {
    const req = job.request;
    const timeoutMs = Math.min(req.timeoutMs ?? this.options.defaultTimeoutMs, this.options.maxTimeoutMs);
    const url = requestUrl(req);
    const refused = url !== undefined ? await this.guard.beforeRun(url) : undefined;
    if (refused) return refused;
    let upload: Upload | undefined;
    try {
      if (req.op === 'upload')
        upload = await this.files.read(job.workspaceDir, req.path, this.options.maxArtifactBytes);
    } catch (err) {
      if (err instanceof FileOpError)
        return fault('failed', { class: err.errorClass, code: err.code, message: err.message });
      throw err;
    }
    const sb = await this.sessionBrowser(job, signal);
    if (!(sb instanceof SessionBrowser)) return sb;
    sb.lastUsed = this.clock.monotonic();
    try {
      return await this.runner.run({ sb, job, timeoutMs, upload }, signal);
    } finally {
      sb.lastUsed = this.clock.monotonic();
    }
  }

  /** The session's browser, or the outcome of an action that could not get one. */
  private async sessionBrowser(
    job: BrowserJob,
    signal?: AbortSignal,
  ): Promise<SessionBrowser | BrowserOutcome> {
    try {
      return await abortable(this.pool.acquire(job, needsDedicatedBrowser(job.request)), signal);
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
  }
}
