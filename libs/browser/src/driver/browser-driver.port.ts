import type { BrowserAvailability, ExtractMode, PageInteraction, WaitUntil } from '../browser.types';

/**
 * One thing a page does. Paths are gone by the time an operation reaches a driver: the router reads
 * uploads from the workspace and writes screenshots, PDFs and downloads into it, so a driver never touches
 * the session's files.
 */
export type PageOperation =
  | PageInteraction
  | { op: 'navigate'; url: string; waitUntil: WaitUntil }
  | { op: 'back' | 'forward' | 'reload'; waitUntil: WaitUntil }
  | { op: 'check'; selector: string; checked: boolean }
  | { op: 'extract'; mode: ExtractMode; selector?: string; maxItems: number }
  | { op: 'screenshot'; fullPage: boolean; selector?: string }
  | { op: 'pdf' }
  | { op: 'download'; selector: string; maxBytes: number }
  | { op: 'upload'; selector: string; file: { name: string; mimeType: string; buffer: Buffer } }
  | { op: 'evaluate'; script: string };

/** What a page operation produced. */
export interface PageResult {
  /** The op's own data (extracted text, links, evaluate's value…). */
  data?: Record<string, unknown>;
  /** Bytes to save (screenshot, pdf, download). */
  bytes?: Buffer;
  mimeType?: string;
  /** A download's own file name. */
  suggestedName?: string;
  /** Navigations: the main document's HTTP status, null when there was no response (same-document). */
  status?: number | null;
  /** The main document came from the egress proxy's refusal, not from the site. */
  egressDenied?: boolean;
  /** The main document is the egress proxy's answer that the session's own port could not be reached. */
  egressUnreachable?: boolean;
  /** The page title after the op, when the driver read it along with the op (saves a round trip). */
  title?: string;
}

/** A request a context is about to send, as the request guard sees it. */
export interface GuardedRequest {
  url: string;
  /** A document load (of any frame). */
  navigation: boolean;
  /** A request of the top-level frame. */
  mainFrame: boolean;
  resourceType: string;
  /** The tab whose frame sent it, when there is one (service workers have none). */
  page?: DriverPage;
}

/**
 * Called for every request of a context before it leaves the browser. Returns a reason to abort it, or
 * undefined to let it go (on to the egress proxy, which checks again). Also called for each redirect hop
 * of a navigation, which the browser follows without asking: the answer cannot stop that hop (the egress
 * proxy refuses it), but a refusal tells the guard at once whose document was refused.
 */
export type RequestGuard = (request: GuardedRequest) => Promise<string | undefined>;

export interface DriverCookie {
  name: string;
  value: string;
  domain: string;
  path: string;
  expires: number;
  httpOnly: boolean;
  secure: boolean;
  sameSite: 'Strict' | 'Lax' | 'None';
}

/** How every context is set up, shared or dedicated. */
export interface ContextSpec {
  /** `http://127.0.0.1:<port>`: the context's egress proxy; nothing bypasses it, loopback included. */
  proxyServer: string;
  requestGuard: RequestGuard;
  /** Header the egress proxy puts on its refusals, so a refused main document is recognised. */
  egressDenialHeader: string;
  acceptDownloads: boolean;
}

export interface DedicatedSpec extends ContextSpec {
  /** Marks the process, for `pid()`. */
  label: string;
  /** Profile directory (kept across relaunches for the session's lifetime). */
  userDataDir: string;
  /** Where the browser puts downloads before the router copies them into the workspace. */
  downloadsDir: string;
}

/** One tab. */
export interface DriverPage {
  url(): string;
  /** The title, or '' when the page does not answer within `timeoutMs`. */
  title(timeoutMs: number): Promise<string>;
  /** HTTP status of the last main-document response, null when none yet. */
  status(): number | null;
  /**
   * Runs one operation under `timeoutMs`. Rejects with `PageOperationError` for anything the page or the
   * network did (timeouts included); anything else is a driver fault. When `signal` fires, the operation
   * stops and rejects with `signal.reason`.
   */
  perform(op: PageOperation, timeoutMs: number, signal?: AbortSignal): Promise<PageResult>;
  /**
   * Whether the tab has never loaded anything: `about:blank` with an empty document (content written by
   * a script counts as loaded). False when the page does not answer within `timeoutMs`.
   */
  blank(timeoutMs: number): Promise<boolean>;
  /** Answers when the page's renderer responds within `timeoutMs` (a hung script makes it false). */
  responsive(timeoutMs: number): Promise<boolean>;
  bringToFront(): Promise<void>;
  /**
   * A JPEG of the viewport as it is now, for a person watching (nothing in the page runs, no file is written);
   * undefined when the page does not paint within `timeoutMs`.
   */
  peek(timeoutMs: number): Promise<Buffer | undefined>;
  isClosed(): boolean;
  close(): Promise<void>;
}

/** An isolated set of tabs with its own cookies and storage. */
export interface DriverContext {
  newPage(): Promise<DriverPage>;
  /** Every open page, including popups the pages opened themselves. Same object for the same page. */
  pages(): DriverPage[];
  cookies(): Promise<DriverCookie[]>;
  addCookies(cookies: DriverCookie[]): Promise<void>;
  /** Called once when the context is gone (closed, or its browser died). */
  onClose(listener: () => void): void;
  /** The browser process of a dedicated context, when it can be found. */
  pid(): number | undefined;
  close(): Promise<void>;
}

/** A browser process shared by many contexts. */
export interface DriverBrowser {
  newContext(spec: ContextSpec): Promise<DriverContext>;
  isConnected(): boolean;
  /** Called once when the process exits or the connection to it is lost. */
  onDisconnected(listener: () => void): void;
  pid(): number | undefined;
  close(): Promise<void>;
}

/** What a driver's `probe` answers. */
export type DriverProbe = Pick<BrowserAvailability, 'available' | 'reason'>;

/**
 * The port between the router and a browser automation library. The Playwright adapter is the real one;
 * tests use a fake that records what happened.
 */
export abstract class BrowserDriver {
  /** Whether a browser can be launched here at all (the executable exists); never launches one. */
  abstract probe(): Promise<DriverProbe>;
  /** Starts a browser process for shared contexts. Rejects with `BrowserLaunchError`. */
  abstract launchShared(label: string): Promise<DriverBrowser>;
  /** Starts a browser process holding one persistent context. Rejects with `BrowserLaunchError`. */
  abstract launchDedicated(spec: DedicatedSpec): Promise<DriverContext>;
}
