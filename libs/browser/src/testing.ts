import { PageOperationError } from './browser.errors';
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
} from './driver/browser-driver.port';

/** What a fake page does for one op; the default behaviour covers every op. */
export type PageBehaviour = (op: PageOperation, page: FakePage) => Promise<PageResult>;

/**
 * A page that records the operations it ran. Navigations ask the context's request guard first (as the
 * real interceptor does) and fail with `ERR_BLOCKED_BY_CLIENT` when it refuses. Operations stop with the
 * signal's reason when their signal fires, as the port says.
 */
export class FakePage implements DriverPage {
  readonly performed: PageOperation[] = [];
  /** The signal each operation was given. */
  readonly signals: (AbortSignal | undefined)[] = [];
  currentUrl = 'about:blank';
  lastStatus: number | null = null;
  closed = false;
  /** A hung renderer: `responsive` answers false. */
  hung = false;
  /** `close` never returns either. */
  closeHangs = false;
  /** Replaces the default behaviour for the next operations. */
  behaviour?: PageBehaviour;
  private pageTitle = '';

  constructor(readonly context: FakeContext) {}

  url(): string {
    return this.currentUrl;
  }

  async title(): Promise<string> {
    return this.pageTitle;
  }

  status(): number | null {
    return this.lastStatus;
  }

  async perform(op: PageOperation, _timeoutMs?: number, signal?: AbortSignal): Promise<PageResult> {
    if (this.closed || this.context.closed) {
      throw new PageOperationError(
        'closed',
        'PAGE_CLOSED',
        'Target page, context or browser has been closed',
      );
    }
    this.performed.push(op);
    this.signals.push(signal);
    const result = (this.behaviour ?? defaultBehaviour)(op, this);
    if (!signal) return result;
    let onAbort!: () => void;
    const stopped = new Promise<never>((_, reject) => {
      onAbort = () => reject(signal.reason as Error); // whatever the aborter gave, as the port says
      if (signal.aborted) onAbort();
      else signal.addEventListener('abort', onAbort, { once: true });
    });
    try {
      return await Promise.race([result, stopped]);
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  async blank(): Promise<boolean> {
    return this.currentUrl === 'about:blank';
  }

  /** A fixed JPEG-marked buffer naming the URL: enough to tell which page was looked at. */
  async peek(): Promise<Buffer | undefined> {
    if (this.closed || this.context.closed) return undefined;
    return Buffer.concat([Buffer.from([0xff, 0xd8, 0xff]), Buffer.from(this.currentUrl)]);
  }

  async responsive(): Promise<boolean> {
    return !this.hung && !this.closed;
  }

  async bringToFront(): Promise<void> {}

  isClosed(): boolean {
    return this.closed || this.context.closed;
  }

  async close(): Promise<void> {
    if (this.closeHangs) return new Promise<void>(() => undefined);
    this.closed = true;
  }

  /** What a successful navigation does. */
  land(url: string, status = 200, title = `title of ${url}`): void {
    this.currentUrl = url;
    this.lastStatus = status;
    this.pageTitle = title;
  }
}

async function defaultBehaviour(op: PageOperation, page: FakePage): Promise<PageResult> {
  switch (op.op) {
    case 'navigate': {
      const refusal = await page.context.spec.requestGuard({
        url: op.url,
        navigation: true,
        mainFrame: true,
        resourceType: 'document',
        page,
      });
      if (refusal) {
        throw new PageOperationError(
          'navigation',
          'ERR_BLOCKED_BY_CLIENT',
          `net::ERR_BLOCKED_BY_CLIENT at ${op.url}`,
        );
      }
      page.land(op.url);
      return { status: 200 };
    }
    case 'screenshot':
      return { bytes: Buffer.from('\x89PNG fake', 'latin1'), mimeType: 'image/png' };
    case 'pdf':
      return { bytes: Buffer.from('%PDF-fake'), mimeType: 'application/pdf' };
    case 'download':
      return { bytes: Buffer.from('a,b\n'), suggestedName: 'data.csv', mimeType: 'application/octet-stream' };
    case 'upload':
      return { data: { uploaded: op.file.name, bytes: op.file.buffer.length } };
    case 'extract':
      return { data: { content: `text of ${page.currentUrl}`, matches: 1 } };
    case 'evaluate':
      return { data: { value: 42 } };
    case 'back':
    case 'forward':
    case 'reload':
    case 'click':
    case 'fill':
    case 'type':
    case 'press':
    case 'select':
    case 'hover':
    case 'check':
    case 'wait_for':
      return {};
  }
}

export class FakeContext implements DriverContext {
  readonly pagesOpen: FakePage[] = [];
  cookieJar: DriverCookie[] = [];
  closed = false;
  private readonly closeListeners: (() => void)[] = [];

  constructor(
    readonly spec: ContextSpec,
    readonly kind: 'shared' | 'dedicated',
    readonly pidValue?: number,
  ) {}

  async newPage(): Promise<DriverPage> {
    if (this.closed) throw new PageOperationError('closed', 'PAGE_CLOSED', 'Context closed');
    return this.openPage();
  }

  /** A page the browser opened by itself (a popup). */
  openPage(): FakePage {
    const p = new FakePage(this);
    this.pagesOpen.push(p);
    return p;
  }

  pages(): DriverPage[] {
    return this.pagesOpen.filter((p) => !p.closed);
  }

  async cookies(): Promise<DriverCookie[]> {
    return [...this.cookieJar];
  }

  async addCookies(cookies: DriverCookie[]): Promise<void> {
    this.cookieJar.push(...cookies);
  }

  onClose(listener: () => void): void {
    this.closeListeners.push(listener);
  }

  pid(): number | undefined {
    return this.pidValue;
  }

  async close(): Promise<void> {
    this.die();
  }

  /** The context (or its browser) is gone. */
  die(): void {
    if (this.closed) return;
    this.closed = true;
    for (const l of this.closeListeners) l();
  }
}

export class FakeBrowser implements DriverBrowser {
  readonly contexts: FakeContext[] = [];
  connected = true;
  closedByRouter = false;
  private readonly listeners: (() => void)[] = [];

  constructor(
    readonly label: string,
    readonly pidValue: number,
  ) {}

  async newContext(spec: ContextSpec): Promise<DriverContext> {
    if (!this.connected) throw new PageOperationError('closed', 'PAGE_CLOSED', 'Browser has been closed');
    const c = new FakeContext(spec, 'shared');
    this.contexts.push(c);
    return c;
  }

  isConnected(): boolean {
    return this.connected;
  }

  onDisconnected(listener: () => void): void {
    this.listeners.push(listener);
  }

  pid(): number | undefined {
    return this.pidValue;
  }

  async close(): Promise<void> {
    this.closedByRouter = true;
    this.crash();
  }

  /** The process dies: contexts close, then the disconnection is reported. */
  crash(): void {
    if (!this.connected) return;
    this.connected = false;
    for (const c of this.contexts) c.die();
    for (const l of this.listeners) l();
  }
}

/** A `BrowserDriver` that records every launch. */
export class FakeDriver extends BrowserDriver {
  available = true;
  readonly shared: FakeBrowser[] = [];
  readonly dedicated: { spec: DedicatedSpec; context: FakeContext }[] = [];
  /** The next launch rejects with this. */
  failNextLaunch?: Error;
  private nextPid = 1000;

  async probe(): Promise<DriverProbe> {
    return this.available
      ? { available: true }
      : { available: false, reason: 'no browser executable (fake)' };
  }

  async launchShared(label: string): Promise<DriverBrowser> {
    this.throwIfFailing();
    const b = new FakeBrowser(label, this.nextPid++);
    this.shared.push(b);
    return b;
  }

  async launchDedicated(spec: DedicatedSpec): Promise<DriverContext> {
    this.throwIfFailing();
    const context = new FakeContext(spec, 'dedicated', this.nextPid++);
    context.openPage(); // a persistent context starts with one blank tab
    this.dedicated.push({ spec, context });
    return context;
  }

  /** All contexts ever created, shared and dedicated. */
  allContexts(): FakeContext[] {
    return [...this.shared.flatMap((b) => b.contexts), ...this.dedicated.map((d) => d.context)];
  }

  private throwIfFailing(): void {
    const err = this.failNextLaunch;
    this.failNextLaunch = undefined;
    if (err) throw err;
  }
}
