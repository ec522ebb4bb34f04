import { randomBytes } from 'node:crypto';
import { mkdir, rm } from 'node:fs/promises';
import * as path from 'node:path';
import { Logger } from '@nestjs/common';
import { type Clock, InvalidInputError } from '@switchyard/common';
import type { ResolvedBrowserOptions } from './browser.options';
import type { BrowserJob } from './browser.types';
import type { BrowserDriver, DriverBrowser, DriverContext } from './driver/browser-driver.port';
import { bounded } from './deadlines';
import { type Route, SessionBrowser } from './session-browser';
import type { SessionLock } from './session-lock';
import type { UrlGuard } from './url-guard';

/** No room for another context: every one is in use by a running action. */
export class ContextLimitError extends Error {}

/**
 * The browsers behind the sessions: one shared Chromium whose contexts serve ordinary browsing, and
 * dedicated Chromiums (own process, persistent profile and download directory under `sessionsDir`) for
 * sessions that need them. Contexts are capped: least recently used idle ones are closed to make room.
 *
 * Owns every browser process, context and egress proxy it opens; `close` shuts them all.
 */
export class BrowserPool {
  private readonly logger = new Logger(BrowserPool.name);
  private readonly sessions = new Map<string, SessionBrowser>();
  private readonly opening = new Map<string, Promise<SessionBrowser>>();
  /** Sessions that moved to a dedicated browser: they go back there after a crash, eviction or idling. */
  private readonly dedicatedSessions = new Set<string>();
  private readonly instance = randomBytes(4).toString('hex');
  private readonly timing: ResolvedBrowserOptions['timing'];
  private shared?: DriverBrowser;
  private sharedLaunch?: Promise<DriverBrowser>;
  private closing = false;

  constructor(
    private readonly options: ResolvedBrowserOptions,
    private readonly driver: BrowserDriver,
    private readonly guard: UrlGuard,
    private readonly lock: SessionLock,
    private readonly clock: Clock,
  ) {
    this.timing = options.timing;
  }

  /** Clears what a previous engine run left: its profiles and downloads belong to browsers that are gone. */
  async start(): Promise<void> {
    await rm(this.options.stateDir, { recursive: true, force: true });
    await mkdir(this.options.sessionsDir, { recursive: true, mode: 0o700 });
  }

  /** Starts the shared browser in the background; a failure is logged, and the first action tries again. */
  prelaunch(): void {
    this.sharedBrowser().catch((err: unknown) =>
      this.logger.warn({ msg: 'could not prelaunch the shared browser', err: String(err) }),
    );
  }

  /** Closes every context and browser and removes the state directory. */
  async close(): Promise<void> {
    this.closing = true;
    await Promise.allSettled([...this.opening.values()]);
    await Promise.allSettled([...this.sessions.values()].map((sb) => this.dispose(sb)));
    const shared = this.shared ?? (await this.sharedLaunch?.catch(() => undefined));
    this.shared = undefined;
    await shared?.close();
    if (this.options.enabled) await rm(this.options.stateDir, { recursive: true, force: true });
  }

  /** Open contexts, and how many of them are dedicated browsers. */
  counts(): { contexts: number; dedicated: number } {
    return { contexts: this.sessions.size, dedicated: this.dedicatedCount() };
  }

  sharedRunning(): boolean {
    return this.shared?.isConnected() === true;
  }

  /** Process ids of the live browsers. */
  processIds(): { shared?: number; dedicated: Record<string, number> } {
    const dedicated: Record<string, number> = {};
    for (const sb of this.sessions.values()) {
      const pid = sb.route === 'dedicated' ? sb.context.pid() : undefined;
      if (pid !== undefined) dedicated[sb.sessionId] = pid;
    }
    return { shared: this.shared?.isConnected() ? this.shared.pid() : undefined, dedicated };
  }

  /**
   * The session's browser, opened (or reopened after a crash) on the route it needs: a session that asks
   * for a dedicated browser moves there and stays. Rejects with `ContextLimitError` when there is no room,
   * `BrowserLaunchError`, `DeadlineError` or `PageOperationError` when the browser does not come up.
   */
  async acquire(job: BrowserJob, wantDedicated: boolean): Promise<SessionBrowser> {
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

  /** The session's open browser, if it has one that is alive: never opens one. */
  existing(sessionId: string): SessionBrowser | undefined {
    const sb = this.sessions.get(sessionId);
    return sb && !sb.dead && !sb.disposed ? sb : undefined;
  }

  /** Closes the session's context or dedicated browser and removes its profile. Idempotent. */
  async release(sessionId: string): Promise<void> {
    await this.opening.get(sessionId)?.catch(() => undefined);
    const sb = this.sessions.get(sessionId);
    if (sb) await this.dispose(sb);
    this.dedicatedSessions.delete(sessionId);
    await rm(this.sessionDir(sessionId), { recursive: true, force: true }).catch(() => undefined);
  }

  /** Closes the browsers of sessions without running actions that have been unused for `idleMs`. */
  async closeIdle(idleMs: number): Promise<void> {
    const now = this.clock.monotonic();
    const idle = [...this.sessions.values()].filter(
      (sb) => !this.lock.busy(sb.sessionId) && now - sb.lastUsed >= idleMs,
    );
    for (const sb of idle) {
      this.logger.debug({ msg: 'closing idle browser context', sessionId: sb.sessionId, route: sb.route });
      await this.dispose(sb);
    }
  }

  /** Closes a session's context (or dedicated browser) and its proxy, and forgets it. Idempotent. */
  async dispose(sb: SessionBrowser): Promise<void> {
    if (this.sessions.get(sb.sessionId) === sb) this.sessions.delete(sb.sessionId);
    if (sb.disposed) return;
    sb.disposed = true;
    await bounded(sb.context.close(), this.timing.housekeepingMs).catch((err: unknown) =>
      this.logger.warn({
        msg: 'browser context did not close cleanly',
        sessionId: sb.sessionId,
        err: String(err),
      }),
    );
    await this.guard.closeEgress(sb.egress);
  }

  /**
   * Whether the browser behind `sb` is gone. Playwright may reject the call in flight a moment before it
   * reports the disconnection, so a `closed` failure waits a little (`timing.crashWaitMs`) for the report.
   */
  async browserGone(sb: SessionBrowser): Promise<boolean> {
    for (let waited = 0; ; waited += 50) {
      if (sb.dead) return true;
      if (sb.route === 'shared' && !this.sharedRunning()) return true;
      if (waited >= this.timing.crashWaitMs) return false;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
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
    const holder: { sb?: SessionBrowser } = {};
    const { egress, spec } = await this.guard.openEgress(holder, job.sessionId, route === 'dedicated');
    let context: DriverContext;
    try {
      if (route === 'shared') {
        const browser = await this.sharedBrowser();
        context = await bounded(browser.newContext(spec), this.timing.housekeepingMs);
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
      await this.guard.closeEgress(egress);
      throw err;
    }
    const sb = new SessionBrowser(job.sessionId, route, context, egress, this.clock.monotonic());
    holder.sb = sb;
    context.onClose(() => {
      if (sb.disposed) return;
      sb.dead = true;
      if (!this.closing) {
        this.logger.warn({ msg: 'browser context lost', sessionId: sb.sessionId, route: sb.route });
      }
    });
    // A persistent context starts with a blank tab: adopt it as the session's first.
    for (const p of context.pages()) sb.register(p);
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
    const cookies = await bounded(sb.context.cookies(), this.timing.housekeepingMs).catch(() => []);
    const currentId = sb.current;
    const currentUrl = currentId ? sb.tabs.get(currentId)?.url() : undefined;
    const nextTab = sb.nextTab;
    await this.dispose(sb);
    const next = await this.open(job, 'dedicated');
    await bounded(next.context.addCookies(cookies), this.timing.housekeepingMs).catch((err: unknown) =>
      this.logger.warn({ msg: 'cookies not carried to the dedicated browser', err: String(err) }),
    );
    // The dedicated browser's first tab takes over the id of the tab the agent was on.
    const first = currentId !== undefined ? next.renameCurrent(currentId, nextTab) : undefined;
    if (first && currentUrl && /^https?:/i.test(currentUrl)) {
      await first
        .perform({ op: 'navigate', url: currentUrl, waitUntil: 'load' }, this.options.defaultTimeoutMs)
        .catch(() => undefined);
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
        .filter((s) => s.sessionId !== sessionId && !this.lock.busy(s.sessionId))
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

  private sessionDir(sessionId: string): string {
    if (!/^[A-Za-z0-9_-]{1,128}$/.test(sessionId))
      throw new InvalidInputError('sessionId', 'invalid session id');
    return path.join(this.options.sessionsDir, sessionId);
  }
}
