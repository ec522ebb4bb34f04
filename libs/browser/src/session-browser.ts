import type { BlockedRequest } from './browser.types';
import type { DriverContext, DriverPage } from './driver/browser-driver.port';
import type { EgressProxy } from './egress/egress-proxy';
import type { UrlRefusal } from './url-policy/url-policy';

/** Refusals kept per session for attribution. */
const REFUSAL_LOG = 100;
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
}

/** One session's browser: a context in the shared browser, or a dedicated browser of its own. */
export class SessionBrowser {
  readonly tabs = new Map<string, DriverPage>();
  current?: string;
  nextTab = 1;
  /** Its browser or context went away (crash, kill); the next action starts afresh. */
  dead = false;
  disposed = false;
  private readonly log: RefusalEntry[] = [];
  private seq = 0;

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
    this.log.push({ ...entry, seq: ++this.seq });
    if (this.log.length > REFUSAL_LOG) this.log.shift();
  }

  since(mark: number): RefusalEntry[] {
    return this.log.filter((e) => e.seq > mark);
  }

  /** Forgets a tab; when it was the current one, the last opened tab becomes current. */
  dropTab(id: string): void {
    this.tabs.delete(id);
    if (this.current === id) this.current = [...this.tabs.keys()].pop();
  }

  tabId(page: DriverPage): string | undefined {
    for (const [id, p] of this.tabs) if (p === page) return id;
    return undefined;
  }
}
