import { constants as C, readdirSync, readFileSync } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  type Browser,
  type BrowserContext,
  chromium,
  type Frame,
  type LaunchOptions,
  type Page,
  type Request,
  type Route,
} from 'playwright-core';
import { BrowserLaunchError } from '../browser.errors';
import { BROWSER_OPTIONS } from '../browser.constants';
import type { ResolvedBrowserOptions } from '../browser.options';
import {
  BrowserDriver,
  type ContextSpec,
  type DedicatedSpec,
  type DriverBrowser,
  type DriverContext,
  type DriverCookie,
  type DriverPage,
  type DriverProbe,
  type GuardedRequest,
} from './browser-driver.port';
import { cleanMessage, toPageError } from './playwright-errors';
import { PlaywrightPage } from './playwright-page';

const MARKER = '--switchyard-browser=';

/**
 * Flags every launch gets on top of the operator's: no proxy bypass for anything, no DNS of Chromium's
 * own (the egress proxy resolves), WebRTC only through the proxy (no UDP to arbitrary hosts), no crash
 * uploads.
 */
const POLICY_ARGS = [
  '--dns-prefetch-disable',
  '--webrtc-ip-handling-policy=disable_non_proxied_udp',
  '--force-webrtc-ip-handling-policy',
  '--disable-breakpad',
];

/**
 * `BrowserDriver` on Playwright (`playwright-core`) driving the system Chromium; with the tab
 * (`playwright-page.ts`) and error translation (`playwright-errors.ts`) beside it, the only place in the
 * engine that imports Playwright. Browsers run headless with the operator's flags, without Playwright's
 * signal handlers (the engine closes them on shutdown) and with a minimal environment: the engine's own
 * variables (API keys, credentials) never reach the browser.
 */
@Injectable()
export class PlaywrightDriver extends BrowserDriver {
  private readonly logger = new Logger('BrowserDriver');

  constructor(@Inject(BROWSER_OPTIONS) private readonly options: ResolvedBrowserOptions) {
    super();
  }

  async probe(): Promise<DriverProbe> {
    try {
      await access(this.options.executablePath, C.X_OK);
      return { available: true };
    } catch {
      return {
        available: false,
        reason: `no browser executable at ${this.options.executablePath}; install Chromium (apt-get install chromium) or set its path`,
      };
    }
  }

  private async launchOptions(label: string): Promise<LaunchOptions> {
    const home = this.options.homeDir;
    await mkdir(home, { recursive: true, mode: 0o700 });
    return {
      executablePath: this.options.executablePath,
      headless: true,
      args: [...this.options.launchArgs, ...POLICY_ARGS, `${MARKER}${label}`],
      timeout: this.options.launchTimeoutMs,
      handleSIGINT: false,
      handleSIGTERM: false,
      handleSIGHUP: false,
      env: {
        PATH: '/usr/local/bin:/usr/bin:/bin',
        HOME: home,
        XDG_CONFIG_HOME: `${home}/.config`,
        XDG_CACHE_HOME: `${home}/.cache`,
        LANG: 'C.UTF-8',
      },
    };
  }

  async launchShared(label: string): Promise<DriverBrowser> {
    this.logger.debug({ msg: 'launching shared browser', label });
    let browser: Browser;
    try {
      browser = await chromium.launch(await this.launchOptions(label));
    } catch (err) {
      throw launchError(this.options.executablePath, err);
    }
    this.logger.debug({ msg: 'shared browser up', label });
    return new PlaywrightBrowser(browser, `${MARKER}${label}`);
  }

  async launchDedicated(spec: DedicatedSpec): Promise<DriverContext> {
    this.logger.debug({ msg: 'launching dedicated browser', label: spec.label });
    let context: BrowserContext;
    try {
      context = await chromium.launchPersistentContext(spec.userDataDir, {
        ...(await this.launchOptions(spec.label)),
        ...contextOptions(spec),
        downloadsPath: spec.downloadsDir,
      });
    } catch (err) {
      throw launchError(this.options.executablePath, err);
    }
    const wrapped = new PlaywrightContext(context, spec, `${MARKER}${spec.label}`);
    await wrapped.install();
    this.logger.debug({ msg: 'dedicated browser up', label: spec.label });
    return wrapped;
  }
}

function launchError(executable: string, err: unknown): BrowserLaunchError {
  return new BrowserLaunchError(
    `could not start the browser (${executable}): ${cleanMessage(err)}`,
    { executable },
    { cause: err },
  );
}

function contextOptions(spec: ContextSpec) {
  return {
    // `<-loopback>` removes Chromium's implicit bypass, so even 127.0.0.1 goes through the proxy.
    proxy: { server: spec.proxyServer, bypass: '<-loopback>' },
    serviceWorkers: 'block' as const,
    acceptDownloads: spec.acceptDownloads,
    viewport: { width: 1280, height: 720 },
  };
}

class PlaywrightBrowser implements DriverBrowser {
  private knownPid?: number;

  constructor(
    private readonly browser: Browser,
    private readonly marker: string,
  ) {}

  async newContext(spec: ContextSpec): Promise<DriverContext> {
    try {
      const context = await this.browser.newContext(contextOptions(spec));
      const wrapped = new PlaywrightContext(context, spec, undefined);
      await wrapped.install();
      return wrapped;
    } catch (err) {
      throw toPageError(err, 'newContext');
    }
  }

  isConnected(): boolean {
    return this.browser.isConnected();
  }

  onDisconnected(listener: () => void): void {
    this.browser.once('disconnected', () => listener());
  }

  pid(): number | undefined {
    this.knownPid ??= findChildPid(this.marker);
    return this.knownPid;
  }

  async close(): Promise<void> {
    await this.browser.close().catch(() => undefined);
  }
}

class PlaywrightContext implements DriverContext {
  private readonly wrappers = new WeakMap<Page, PlaywrightPage>();
  private knownPid?: number;

  constructor(
    private readonly context: BrowserContext,
    private readonly spec: ContextSpec,
    /** Set for a dedicated (persistent) context: it is its browser. */
    private readonly marker: string | undefined,
  ) {}

  /**
   * Routes every request through the guard before it leaves the browser, and shows it the redirect hops
   * of navigations too: Chromium follows those without routing them, so only the proxy can refuse them,
   * but the guard learns at once that a tab's document was refused.
   */
  async install(): Promise<void> {
    this.context.on('request', (req) => {
      if (req.redirectedFrom() && req.isNavigationRequest()) {
        this.spec.requestGuard(this.guarded(req)).catch(() => undefined);
      }
    });
    await this.context.route('**/*', (route) => this.guard(route));
  }

  private async guard(route: Route): Promise<void> {
    let reason: string | undefined;
    try {
      reason = await this.spec.requestGuard(this.guarded(route.request()));
    } catch {
      reason = 'the request guard failed';
    }
    // The page may be gone meanwhile; then there is nothing left to continue or abort.
    if (reason !== undefined) await route.abort('blockedbyclient').catch(() => undefined);
    else await route.continue().catch(() => undefined);
  }

  /** A request as the guard sees it. */
  private guarded(req: Request): GuardedRequest {
    let frame: Frame | undefined;
    try {
      frame = req.frame();
    } catch {
      // Service-worker requests have no frame (and service workers are blocked anyway).
    }
    return {
      url: req.url(),
      navigation: req.isNavigationRequest(),
      mainFrame: frame?.parentFrame() === null,
      resourceType: req.resourceType(),
      page: frame && this.wrap(frame.page()),
    };
  }

  wrap(page: Page): PlaywrightPage {
    let w = this.wrappers.get(page);
    if (!w) {
      w = new PlaywrightPage(page, this.spec.egressDenialHeader);
      this.wrappers.set(page, w);
    }
    return w;
  }

  async newPage(): Promise<DriverPage> {
    try {
      return this.wrap(await this.context.newPage());
    } catch (err) {
      throw toPageError(err, 'newPage');
    }
  }

  pages(): DriverPage[] {
    return this.context.pages().map((p) => this.wrap(p));
  }

  async cookies(): Promise<DriverCookie[]> {
    return (await this.context.cookies()).map((c) => ({ ...c }));
  }

  async addCookies(cookies: DriverCookie[]): Promise<void> {
    if (cookies.length > 0) await this.context.addCookies(cookies);
  }

  onClose(listener: () => void): void {
    this.context.once('close', () => listener());
  }

  pid(): number | undefined {
    if (!this.marker) return undefined;
    this.knownPid ??= findChildPid(this.marker);
    return this.knownPid;
  }

  async close(): Promise<void> {
    await this.context.close().catch(() => undefined);
  }
}

/** The pid of this process's child whose command line holds `marker` (the browser's main process). */
function findChildPid(marker: string): number | undefined {
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return undefined;
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid !== process.pid) continue;
      if (readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').includes(marker)) return Number(entry);
    } catch {
      // the process went away while we looked
    }
  }
  return undefined;
}
