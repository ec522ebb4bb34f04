import { Logger } from '@nestjs/common';
import type { ResolvedBrowserOptions } from './browser.options';
import { PageOperationError } from './browser.errors';
import type { BrowserPool } from './browser-pool';
import type { DriverPage } from './driver/browser-driver.port';
import { bounded } from './deadlines';
import type { SessionBrowser } from './session-browser';

/**
 * The tab ops of a session (`new_tab`, `switch_tab`, `close_tab`), the tab a page op runs in, and the
 * clean-up of a tab left hung by a timeout. Every driver call here runs under a deadline.
 */
export class SessionTabs {
  private readonly logger = new Logger(SessionTabs.name);

  constructor(
    private readonly timing: ResolvedBrowserOptions['timing'],
    private readonly pool: BrowserPool,
  ) {}

  /** Opens a tab and makes it the current one. */
  async open(sb: SessionBrowser, signal?: AbortSignal): Promise<{ id: string; page: DriverPage }> {
    const page = await bounded(sb.context.newPage(), this.timing.housekeepingMs, signal);
    const id = sb.register(page);
    sb.current = id;
    return { id, page };
  }

  /** Makes `tabId` the current tab. Rejects with `TAB_NOT_FOUND` when no such tab is open. */
  async switchTo(sb: SessionBrowser, tabId: string): Promise<void> {
    sb.syncTabs();
    const page = sb.tabs.get(tabId);
    if (!page) {
      const open = [...sb.tabs.keys()].join(', ') || 'none';
      throw new PageOperationError('other', 'TAB_NOT_FOUND', `no open tab ${tabId}; open tabs: ${open}`);
    }
    sb.current = tabId;
    await page.bringToFront();
  }

  /** Closes `tabId` (default: the current tab) and returns its id. Rejects with `TAB_NOT_FOUND`. */
  async close(sb: SessionBrowser, tabId: string | undefined, signal?: AbortSignal): Promise<string> {
    sb.syncTabs();
    const id = tabId ?? sb.current;
    const page = id === undefined ? undefined : sb.tabs.get(id);
    if (!page || id === undefined) {
      throw new PageOperationError('other', 'TAB_NOT_FOUND', `no open tab ${tabId ?? '(current)'}`);
    }
    await bounded(page.close(), this.timing.housekeepingMs, signal);
    sb.dropTab(id);
    return id;
  }

  /** The tab a page op runs in: the current one, else the last opened, else a new one. */
  async current(sb: SessionBrowser, signal?: AbortSignal): Promise<string> {
    sb.syncTabs();
    if (sb.current !== undefined && sb.tabs.has(sb.current)) return sb.current;
    const last = [...sb.tabs.keys()].pop();
    if (last !== undefined) {
      sb.current = last;
      return last;
    }
    return (await this.open(sb, signal)).id;
  }

  /**
   * After a timeout: a tab whose renderer no longer answers is closed (or, if that hangs too, the whole
   * context, so the session is never wedged). Answers whether the tab was dropped.
   */
  async dropIfHung(sb: SessionBrowser, tabId: string): Promise<boolean> {
    const page = sb.tabs.get(tabId);
    if (!page || page.isClosed()) return false;
    if (await page.responsive(this.timing.probeMs)) return false;
    this.logger.warn({ msg: 'closing an unresponsive tab', sessionId: sb.sessionId, tabId });
    sb.dropTab(tabId);
    try {
      await bounded(page.close(), this.timing.probeMs);
    } catch {
      await this.pool.dispose(sb);
    }
    return true;
  }
}
