import { constants as C, readdirSync, readFileSync } from 'node:fs';
import { access, mkdir } from 'node:fs/promises';
import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  type Browser,
  type BrowserContext,
  chromium,
  type Download,
  errors,
  type LaunchOptions,
  type Page,
  type Response,
  type Route,
} from 'playwright-core';
import { BrowserLaunchError, type PageFailureKind, PageOperationError } from '../browser.errors';
import { BROWSER_OPTIONS } from '../browser.constants';
import type { ResolvedBrowserOptions } from '../browser.options';
import type { WaitUntil } from '../browser.types';
import { clip } from '../browser-output';
import {
  BrowserDriver,
  type ContextSpec,
  type DedicatedSpec,
  type DriverBrowser,
  type DriverContext,
  type DriverCookie,
  type DriverPage,
  type DriverProbe,
  type PageOperation,
  type PageResult,
} from './browser-driver.port';

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
 * `BrowserDriver` on Playwright (`playwright-core`) driving the system Chromium. The only place in the
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

  /** Routes every request through the guard before it leaves the browser. */
  async install(): Promise<void> {
    await this.context.route('**/*', (route) => this.guard(route));
  }

  private async guard(route: Route): Promise<void> {
    const req = route.request();
    let mainFrame = false;
    try {
      mainFrame = req.frame().parentFrame() === null;
    } catch {
      // Service-worker requests have no frame (and service workers are blocked anyway).
    }
    let reason: string | undefined;
    try {
      reason = await this.spec.requestGuard({
        url: req.url(),
        navigation: req.isNavigationRequest(),
        mainFrame,
        resourceType: req.resourceType(),
      });
    } catch {
      reason = 'the request guard failed';
    }
    // The page may be gone meanwhile; then there is nothing left to continue or abort.
    if (reason !== undefined) await route.abort('blockedbyclient').catch(() => undefined);
    else await route.continue().catch(() => undefined);
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

class PlaywrightPage implements DriverPage {
  private lastStatus: number | null = null;

  constructor(
    private readonly page: Page,
    private readonly denialHeader: string,
  ) {
    page.on('response', (r: Response) => {
      try {
        if (r.request().isNavigationRequest() && r.frame() === page.mainFrame()) this.lastStatus = r.status();
      } catch {
        // responses of service workers have no frame
      }
    });
  }

  url(): string {
    return this.page.url();
  }

  async title(timeoutMs: number): Promise<string> {
    return (await withTimer(this.page.title(), timeoutMs)) ?? '';
  }

  status(): number | null {
    return this.lastStatus;
  }

  async responsive(timeoutMs: number): Promise<boolean> {
    const ok = await withTimer(
      this.page.evaluate('1').then(() => true),
      timeoutMs,
    ).catch(() => false);
    return ok === true;
  }

  async bringToFront(): Promise<void> {
    await this.page.bringToFront().catch(() => undefined);
  }

  isClosed(): boolean {
    return this.page.isClosed();
  }

  async close(): Promise<void> {
    await this.page.close({ runBeforeUnload: false }).catch(() => undefined);
  }

  async perform(op: PageOperation, timeout: number): Promise<PageResult> {
    try {
      return await this.run(op, timeout);
    } catch (err) {
      const failure = toPageError(err, op.op);
      if (failure instanceof PageOperationError && failure.failure === 'navigation') await this.settle();
      throw failure;
    }
  }

  /**
   * Chromium commits the error page of a failed navigation a moment after Playwright reports the failure;
   * a navigation started before that commit would be cut short by it. Waits (briefly) for it.
   */
  private async settle(): Promise<void> {
    if (this.page.isClosed() || this.page.url().startsWith('chrome-error:')) return;
    await this.page
      .waitForEvent('framenavigated', { predicate: (f) => f === this.page.mainFrame(), timeout: 1000 })
      .catch(() => undefined);
  }

  private navigated(resp: Response | null): PageResult {
    if (!resp) return { status: null };
    this.lastStatus = resp.status();
    return { status: resp.status(), egressDenied: resp.headers()[this.denialHeader] === 'denied' };
  }

  private async run(op: PageOperation, timeout: number): Promise<PageResult> {
    const page = this.page;
    switch (op.op) {
      case 'navigate':
        return this.navigated(await this.goto(op.url, op.waitUntil, timeout));
      case 'back':
      case 'forward': {
        const go = op.op === 'back' ? page.goBack.bind(page) : page.goForward.bind(page);
        const before = page.url();
        const resp = await go({ waitUntil: op.waitUntil, timeout });
        // null: no history entry that way, or a same-document move.
        return { ...this.navigated(resp), data: { moved: resp !== null || page.url() !== before } };
      }
      case 'reload':
        return this.navigated(await page.reload({ waitUntil: op.waitUntil, timeout }));
      case 'click':
        await page.locator(op.selector).click({ timeout, button: op.button, clickCount: op.clickCount });
        return {};
      case 'fill':
        await page.locator(op.selector).fill(op.value, { timeout });
        return {};
      case 'type':
        await page.locator(op.selector).pressSequentially(op.text, { timeout, delay: op.delayMs });
        return {};
      case 'press':
        if (op.selector !== undefined) await page.locator(op.selector).press(op.key, { timeout });
        else await page.keyboard.press(op.key);
        return {};
      case 'select':
        return { data: { selected: await page.locator(op.selector).selectOption(op.values, { timeout }) } };
      case 'hover':
        await page.locator(op.selector).hover({ timeout });
        return {};
      case 'check':
        if (op.checked) await page.locator(op.selector).check({ timeout });
        else await page.locator(op.selector).uncheck({ timeout });
        return {};
      case 'wait_for':
        return this.waitFor(op, timeout);
      case 'extract': {
        // Read-only: the title can be read alongside instead of after.
        const [data, title] = await Promise.all([this.extract(op, timeout), this.page.title()]);
        return { data, title };
      }
      case 'screenshot': {
        const bytes =
          op.selector !== undefined
            ? await page.locator(op.selector).screenshot({ timeout, type: 'png' })
            : await page.screenshot({ timeout, type: 'png', fullPage: op.fullPage });
        return { bytes, mimeType: 'image/png' };
      }
      case 'pdf':
        // No timeout option in Playwright; the router's deadline bounds it.
        return { bytes: await page.pdf({ printBackground: true }), mimeType: 'application/pdf' };
      case 'download':
        return this.download(op.selector, op.maxBytes, timeout);
      case 'upload':
        await page.locator(op.selector).setInputFiles(op.file, { timeout });
        return { data: { uploaded: op.file.name, bytes: op.file.buffer.length } };
      case 'evaluate':
        return { data: { value: await this.evaluate(op.script) } };
    }
  }

  /**
   * `page.goto`, tried a second time when it was only cut short by the error page of the tab's previous,
   * failed navigation committing late (`chrome-error://chromewebdata/`): that is not the caller's doing.
   */
  private async goto(url: string, waitUntil: WaitUntil, timeout: number): Promise<Response | null> {
    const started = performance.now();
    try {
      return await this.page.goto(url, { waitUntil, timeout });
    } catch (err) {
      const left = timeout - (performance.now() - started);
      if (!/interrupted by another navigation to "?chrome-error:/.test(cleanMessage(err)) || left < 100)
        throw err;
      return await this.page.goto(url, { waitUntil, timeout: Math.floor(left) });
    }
  }

  private async waitFor(
    op: Extract<PageOperation, { op: 'wait_for' }>,
    timeout: number,
  ): Promise<PageResult> {
    const page = this.page;
    if (op.selector !== undefined) {
      await page
        .locator(op.selector)
        .first()
        .waitFor({ state: op.state ?? 'visible', timeout });
      return { data: { matched: 'selector' } };
    }
    if (op.text !== undefined) {
      await page.getByText(op.text).first().waitFor({ timeout });
      return { data: { matched: 'text' } };
    }
    if (op.url !== undefined) {
      await page.waitForURL(op.url, { timeout });
      return { data: { matched: 'url' } };
    }
    await page.waitForLoadState(op.loadState ?? 'load', { timeout });
    return { data: { matched: 'loadState' } };
  }

  private async extract(
    op: Extract<PageOperation, { op: 'extract' }>,
    timeout: number,
  ): Promise<Record<string, unknown>> {
    const page = this.page;
    const scope = op.selector !== undefined ? page.locator(op.selector) : undefined;
    const count = scope ? await scope.count() : 1;
    if (scope && count === 0) {
      throw new PageOperationError('selector', 'NO_MATCH', `no element matches ${op.selector}`);
    }
    switch (op.mode) {
      case 'text':
        return {
          content: scope
            ? (await scope.allInnerTexts()).slice(0, op.maxItems).join('\n')
            : await page.locator('body').innerText({ timeout }),
          matches: count,
        };
      case 'html':
        return {
          content: scope
            ? (await scope.evaluateAll(outerHtmlOf, op.maxItems)).join('\n')
            : await page.content(),
          matches: count,
        };
      case 'links': {
        const anchors = (scope ?? page.locator(':root')).locator('a[href]');
        return { links: await anchors.evaluateAll(linksOf, op.maxItems), total: await anchors.count() };
      }
      case 'accessibility':
        return {
          content: await (scope ? scope.first() : page.locator(':root')).ariaSnapshot({ timeout }),
          matches: count,
        };
    }
  }

  private async download(selector: string, maxBytes: number, timeout: number): Promise<PageResult> {
    const event = this.page.waitForEvent('download', { timeout });
    event.catch(() => undefined); // a failed click below must not leave this rejection unhandled
    await this.page.locator(selector).click({ timeout });
    const download: Download = await event;
    try {
      const failure = await download.failure();
      if (failure)
        throw new PageOperationError('navigation', 'DOWNLOAD_FAILED', `download failed: ${failure}`);
      const stream = await download.createReadStream();
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const chunk of stream as AsyncIterable<Buffer>) {
        size += chunk.length;
        if (size > maxBytes) {
          stream.destroy();
          throw new PageOperationError(
            'limit',
            'FILE_TOO_LARGE',
            `the download is over the ${maxBytes}-byte artifact cap`,
          );
        }
        chunks.push(chunk);
      }
      return {
        bytes: Buffer.concat(chunks),
        suggestedName: download.suggestedFilename(),
        mimeType: 'application/octet-stream',
        data: { url: download.url(), suggestedName: download.suggestedFilename() },
      };
    } finally {
      await download.delete().catch(() => undefined);
    }
  }

  /**
   * The script is evaluated as page JavaScript (statements allowed; the last expression is the value).
   * When that value is a function, it is called and its (awaited) result returned.
   */
  private async evaluate(script: string): Promise<unknown> {
    const handle = await this.page.evaluateHandle(script);
    try {
      const isFunction = await handle.evaluate((v: unknown) => typeof v === 'function');
      if (isFunction) return await handle.evaluate((f: unknown) => (f as () => unknown)());
      return await handle.jsonValue();
    } finally {
      await handle.dispose().catch(() => undefined);
    }
  }
}

/** Runs in the page: the outer HTML of the first `max` elements. (No DOM types here, hence the shapes.) */
function outerHtmlOf(elements: unknown[], max: number): string[] {
  return elements.slice(0, max).map((e) => (e as { outerHTML: string }).outerHTML);
}

/** Runs in the page: text and absolute href of the first `max` anchors. */
function linksOf(elements: unknown[], max: number): { text: string; href: string }[] {
  return elements.slice(0, max).map((e) => {
    const a = e as { innerText?: string; textContent: string | null; href: string };
    // Each link bounded, so `maxItems` bounds the whole list.
    return { text: (a.innerText || a.textContent || '').trim().slice(0, 500), href: a.href.slice(0, 4096) };
  });
}

/** Resolves to the promise's value, or to undefined after `ms`. The timer never outlives the call. */
async function withTimer<T>(p: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const expired = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([p.catch(() => undefined), expired]);
  } finally {
    clearTimeout(timer);
  }
}

// eslint-disable-next-line no-control-regex -- Playwright colours its call logs
const ANSI = /\x1b\[[0-9;]*m/g;

/** Playwright's message without the call log and colours, at most 1000 characters. */
function cleanMessage(err: unknown): string {
  const raw = err instanceof Error ? err.message : String(err);
  const text = raw
    .replace(ANSI, '')
    .split(/\n\s*Call log:/)[0]
    .trim();
  return clip(text, 1000);
}

const CLOSED =
  /Target page, context or browser has been closed|Browser has been closed|browser has disconnected|Target closed|Page closed|Context closed|has been closed/i;

/** Translates a Playwright rejection into a `PageOperationError` the router understands. */
function toPageError(err: unknown, op: string): unknown {
  if (err instanceof PageOperationError) return err;
  const message = cleanMessage(err);
  const fail = (kind: PageFailureKind, code: string) =>
    new PageOperationError(kind, code, message, { cause: err });
  if (err instanceof errors.TimeoutError) return fail('timeout', 'TIMEOUT');
  if (CLOSED.test(message)) return fail('closed', 'PAGE_CLOSED');
  const net = /net::(ERR_[A-Z_]+)/.exec(message);
  if (net) return fail('navigation', net[1]);
  if (/interrupted by another navigation/.test(message)) return fail('navigation', 'NAVIGATION_INTERRUPTED');
  if (
    /strict mode violation|not an? <?(?:select|input|checkbox|radio)|Element is not|is not a|does not|no element/i.test(
      message,
    )
  ) {
    return fail('selector', 'SELECTOR');
  }
  if (op === 'evaluate') return fail('script', 'SCRIPT_ERROR');
  if (/Unknown key|Invalid|Cannot|Unsupported|not supported/i.test(message))
    return fail('other', 'INVALID_OPERATION');
  return err;
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
