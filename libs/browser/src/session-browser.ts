import type { EgressRecord } from '@switchyard/common';
import type { BlockedRequest } from './browser.types';
import type { DriverContext, DriverPage } from './driver/browser-driver.port';
import type { EgressAttempt, EgressProxy, UrlRefusal } from '@switchyard/network';

/** Refusals kept per session for attribution. */
const REFUSAL_LOG = 100;
/** Ended connections to the session's own ports kept for the actions to collect (the oldest go first). */
const LOCAL_LOG = 1000;
/** Connections to the session's own ports listed in one action's result. */
const LOCAL_IN_RESULT = 200;
/** Where a session's browser runs. */
export type Route = 'shared' | 'dedicated';

/** A request the URL policy refused, logged against the session whose context sent it. */
export interface RefusalEntry extends BlockedRequest {
  seq: number;
  code: UrlRefusal['code'];
  /** The route interceptor refused it, or the egress proxy (redirect hops, websockets…). */
  source: 'guard' | 'proxy';
  /** The top-level document of a tab was refused (the action's own navigation). */
  mainFrameNavigation: boolean;
  /** The tab that sent it, when known (the proxy never knows). */
  page?: DriverPage;
}

/** A connection to one of the session's own ports that could not be opened (no sandbox, or nothing listens). */
export interface UnreachableEntry {
  seq: number;
  /** `host:port` as the page asked for it. */
  target: string;
  message: string;
  /** The dialer's error code, `PORT_CLOSED` when it had none. */
  code: string;
}

/** Why an action's own document is the egress proxy's answer that the session's port could not be reached. */
export class PortUnreachableError extends Error {
  constructor(readonly entry: Pick<UnreachableEntry, 'target' | 'message' | 'code'>) {
    super(`${entry.target}: ${entry.message}`);
  }
}

/**
 * The reason a running action is stopped with when the URL policy refuses a request it depends on (its
 * tab's own document, a download): waiting on would only wait out its timeout.
 */
export class RequestRefusedError extends Error {
  constructor(readonly refusal: Pick<RefusalEntry, 'url' | 'reason' | 'code'>) {
    super(`refused ${refusal.url}: ${refusal.reason}`);
  }
}

/**
 * One session's browser: a context in the shared browser, or a dedicated browser of its own, with the
 * session's tabs (ids the agent uses, stable across actions) and the refusals logged against it.
 */
export class SessionBrowser {
  readonly tabs = new Map<string, DriverPage>();
  current?: string;
  nextTab = 1;
  /** Its browser or context went away (crash, kill); the next action starts afresh. */
  dead = false;
  disposed = false;
  private readonly log: RefusalEntry[] = [];
  private readonly unreachableLog: UnreachableEntry[] = [];
  /** Ended connections to the session's own ports not yet listed in an action's result. */
  private readonly localLog: EgressAttempt[] = [];
  /** The proxy's `seq` up to which connections to the session's own ports have been listed. */
  private localListed = 0;
  /** One sequence for refusals and unreachable ports, so one `mark` tells what is later in both. */
  private seq = 0;
  private watcher?: (entry: RefusalEntry) => void;

  constructor(
    readonly sessionId: string,
    readonly route: Route,
    readonly context: DriverContext,
    readonly egress: EgressProxy,
    public lastUsed: number,
  ) {}

  get mark(): number {
    return this.seq;
  }

  record(entry: Omit<RefusalEntry, 'seq'>): void {
    const logged = { ...entry, seq: ++this.seq };
    this.log.push(logged);
    if (this.log.length > REFUSAL_LOG) this.log.shift();
    this.watcher?.(logged);
  }

  /**
   * Hands every refusal logged from now on to `watcher` (the running action's: a session runs one at a
   * time), until the returned function is called.
   */
  watch(watcher: (entry: RefusalEntry) => void): () => void {
    this.watcher = watcher;
    return () => {
      if (this.watcher === watcher) this.watcher = undefined;
    };
  }

  since(mark: number): RefusalEntry[] {
    return this.log.filter((e) => e.seq > mark);
  }

  recordUnreachable(entry: Omit<UnreachableEntry, 'seq'>): void {
    this.unreachableLog.push({ ...entry, seq: ++this.seq });
    if (this.unreachableLog.length > REFUSAL_LOG) this.unreachableLog.shift();
  }

  unreachableSince(mark: number): UnreachableEntry[] {
    return this.unreachableLog.filter((e) => e.seq > mark);
  }

  /** An ended connection of the egress proxy that went to the session's own sandbox. */
  recordLocal(attempt: EgressAttempt): void {
    // One still open when an action listed it was listed then.
    if (attempt.seq <= this.localListed) return;
    this.localLog.push(attempt);
    if (this.localLog.length > LOCAL_LOG) this.localLog.shift();
  }

  /**
   * The connections to the session's own ports not listed yet, ended or still open (with their bytes so far), in the
   * order they were made, at most 200; each is listed once. The session's actions run one at a time: at the end of
   * each, this is what its pages opened while it ran, and since the one before (a page's scripts do not wait).
   */
  takeLocalEgress(): EgressRecord[] {
    const open = this.egress.openAttempts().filter((a) => a.local === true && a.seq > this.localListed);
    const fresh = [...this.localLog, ...open].sort((a, b) => a.seq - b.seq);
    this.localLog.length = 0;
    this.localListed = Math.max(this.localListed, ...fresh.map((a) => a.seq));
    return fresh.slice(0, LOCAL_IN_RESULT).map((a) => ({
      host: a.host,
      port: a.port,
      allowed: a.allowed,
      ...(a.reason !== undefined && { reason: a.reason }),
      bytesIn: a.bytesIn,
      bytesOut: a.bytesOut,
    }));
  }

  /** The id of `page`, giving it the next one when it is new. */
  register(page: DriverPage): string {
    const known = this.tabId(page);
    if (known) return known;
    const id = `tab_${this.nextTab++}`;
    this.tabs.set(id, page);
    return id;
  }

  /** Drops closed tabs and adopts pages the browser opened by itself (popups). Returns the new tab ids. */
  syncTabs(): string[] {
    if (this.dead) return [];
    for (const [id, p] of this.tabs) if (p.isClosed()) this.tabs.delete(id);
    const opened: string[] = [];
    for (const p of this.context.pages()) {
      if (!p.isClosed() && this.tabId(p) === undefined) opened.push(this.register(p));
    }
    if (this.current !== undefined && !this.tabs.has(this.current))
      this.current = [...this.tabs.keys()].pop();
    return opened;
  }

  /** Forgets a tab; when it was the current one, the last opened tab becomes current. */
  dropTab(id: string): void {
    this.tabs.delete(id);
    if (this.current === id) this.current = [...this.tabs.keys()].pop();
  }

  /**
   * After a move to another browser: the current tab (the first one, which the new browser opened) takes
   * the id `id` the agent knew it by, and new ids continue after `nextTab`. Returns that tab.
   */
  renameCurrent(id: string, nextTab: number): DriverPage | undefined {
    const was = this.current;
    const first = was !== undefined ? this.tabs.get(was) : undefined;
    if (was === undefined || !first) return undefined;
    this.tabs.delete(was);
    this.tabs.set(id, first);
    this.current = id;
    this.nextTab = Math.max(nextTab, this.nextTab);
    return first;
  }

  tabId(page: DriverPage): string | undefined {
    for (const [id, p] of this.tabs) if (p === page) return id;
    return undefined;
  }
}
