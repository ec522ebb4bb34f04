import type { Download, Frame, Page, Request, Response } from 'playwright-core';
import { PageOperationError } from '../browser.errors';
import type { WaitUntil } from '../browser.types';
import type { DriverPage, PageOperation, PageResult } from './browser-driver.port';
import { cleanMessage, toPageError } from './playwright-errors';

/**
 * One Playwright tab behind the `DriverPage` port: runs page operations and translates what Playwright
 * reports (`toPageError`), tracks the main document's status (and whether a new one is on its way), and
 * recognises the egress proxy's refusals by their header.
 */
export class PlaywrightPage implements DriverPage {
  private lastStatus: number | null = null;
  /** A main-frame navigation was sent and has neither committed nor turned into a download. */
  private navigating = false;

  constructor(
    private readonly page: Page,
    private readonly denialHeader: string,
  ) {
    page.on('request', (r: Request) => {
      if (this.isMainNavigation(r)) this.navigating = true;
    });
    page.on('response', (r: Response) => {
      if (this.isMainNavigation(r.request())) this.lastStatus = r.status();
    });
    page.on('framenavigated', (f: Frame) => {
      if (f === page.mainFrame()) this.navigating = false;
    });
    page.on('download', () => (this.navigating = false));
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

  async peek(timeoutMs: number): Promise<Buffer | undefined> {
    return this.page
      .screenshot({ type: 'jpeg', quality: 60, timeout: timeoutMs, animations: 'allow', caret: 'initial' })
      .catch(() => undefined);
  }

  isClosed(): boolean {
    return this.page.isClosed();
  }

  async close(): Promise<void> {
    await this.page.close({ runBeforeUnload: false }).catch(() => undefined);
  }

  async blank(timeoutMs: number): Promise<boolean> {
    if (this.page.url() !== 'about:blank') return false;
    // Throws (so: not blank) when the document has no head or body: something replaced it.
    const empty = await withTimer(this.page.evaluate(EMPTY_DOCUMENT), timeoutMs);
    return empty === true;
  }

  async perform(op: PageOperation, timeout: number, signal?: AbortSignal): Promise<PageResult> {
    try {
      return await this.run(op, { timeout, signal });
    } catch (err) {
      if (signal?.aborted) {
        // The caller stopped it (its reason is the answer, not what Playwright made of the abort), often
        // because the navigation it waited on was refused: the tab is left once that has landed.
        await this.settle(this.navigating);
        throw signal.reason;
      }
      const failure = toPageError(err, op.op);
      if (failure instanceof PageOperationError && failure.failure === 'navigation') {
        await this.settle(!this.page.url().startsWith('chrome-error:'));
      }
      throw failure;
    }
  }

  /**
   * Chromium commits the error page of a failed or refused navigation a moment after Playwright reports
   * it; a navigation started before that commit would be cut short by it, and the refusals that come with
   * it (the proxy's, Chromium's retries) belong to the op that caused them. Waits (briefly) for it when
   * one is `pending`.
   */
  private async settle(pending: boolean): Promise<void> {
    if (this.page.isClosed() || !pending) return;
    await this.page
      .waitForEvent('framenavigated', { predicate: (f) => f === this.page.mainFrame(), timeout: 1000 })
      .catch(() => undefined);
  }

  /** A document request of the tab's top-level frame (service workers' requests have no frame). */
  private isMainNavigation(r: Request): boolean {
    try {
      return r.isNavigationRequest() && r.frame() === this.page.mainFrame();
    } catch {
      return false;
    }
  }

  private navigated(resp: Response | null): PageResult {
    if (!resp) return { status: null };
    this.lastStatus = resp.status();
    const mark = resp.headers()[this.denialHeader];
    return {
      status: resp.status(),
      egressDenied: mark === 'denied',
      ...(mark === 'unreachable' && { egressUnreachable: true }),
    };
  }

  private async run(op: PageOperation, o: CallOptions): Promise<PageResult> {
    const page = this.page;
    switch (op.op) {
      case 'navigate':
        return this.navigated(await this.goto(op.url, op.waitUntil, o));
      case 'back':
      case 'forward': {
        const go = op.op === 'back' ? page.goBack.bind(page) : page.goForward.bind(page);
        const before = page.url();
        const resp = await go({ waitUntil: op.waitUntil, ...o });
        // null: no history entry that way, or a same-document move.
        return { ...this.navigated(resp), data: { moved: resp !== null || page.url() !== before } };
      }
      case 'reload':
        return this.navigated(await page.reload({ waitUntil: op.waitUntil, ...o }));
      case 'click':
        await page.locator(op.selector).click({ ...o, button: op.button, clickCount: op.clickCount });
        return {};
      case 'fill':
        await page.locator(op.selector).fill(op.value, o);
        return {};
      case 'type':
        await page.locator(op.selector).pressSequentially(op.text, { ...o, delay: op.delayMs });
        return {};
      case 'press':
        if (op.selector !== undefined) await page.locator(op.selector).press(op.key, o);
        else await page.keyboard.press(op.key);
        return {};
      case 'select':
        return { data: { selected: await page.locator(op.selector).selectOption(op.values, o) } };
      case 'hover':
        await page.locator(op.selector).hover(o);
        return {};
      case 'check':
        if (op.checked) await page.locator(op.selector).check(o);
        else await page.locator(op.selector).uncheck(o);
        return {};
      case 'wait_for':
        return this.waitFor(op, o);
      case 'extract': {
        // Read-only: the title can be read alongside instead of after.
        const [data, title] = await Promise.all([this.extract(op, o), this.page.title()]);
        return { data, title };
      }
      case 'screenshot': {
        const bytes =
          op.selector !== undefined
            ? await page.locator(op.selector).screenshot({ ...o, type: 'png' })
            : await page.screenshot({ timeout: o.timeout, type: 'png', fullPage: op.fullPage });
        return { bytes, mimeType: 'image/png' };
      }
      case 'pdf':
        // No timeout option in Playwright; the router's deadline bounds it.
        return { bytes: await page.pdf({ printBackground: true }), mimeType: 'application/pdf' };
      case 'download':
        return this.download(op.selector, op.maxBytes, o);
      case 'upload':
        await page.locator(op.selector).setInputFiles(op.file, o);
        return { data: { uploaded: op.file.name, bytes: op.file.buffer.length } };
      case 'evaluate':
        return { data: { value: await this.evaluate(op.script) } };
    }
  }

  /**
   * `page.goto`, tried a second time when it was only cut short by the error page of the tab's previous,
   * failed navigation committing late (`chrome-error://chromewebdata/`): that is not the caller's doing.
   */
  private async goto(url: string, waitUntil: WaitUntil, o: CallOptions): Promise<Response | null> {
    const started = performance.now();
    try {
      return await this.page.goto(url, { waitUntil, ...o });
    } catch (err) {
      const left = o.timeout - (performance.now() - started);
      if (!/interrupted by another navigation to "?chrome-error:/.test(cleanMessage(err)) || left < 100)
        throw err;
      return await this.page.goto(url, { waitUntil, ...o, timeout: Math.floor(left) });
    }
  }

  private async waitFor(op: Extract<PageOperation, { op: 'wait_for' }>, o: CallOptions): Promise<PageResult> {
    const page = this.page;
    if (op.selector !== undefined) {
      await page
        .locator(op.selector)
        .first()
        .waitFor({ state: op.state ?? 'visible', ...o });
      return { data: { matched: 'selector' } };
    }
    if (op.text !== undefined) {
      await page.getByText(op.text).first().waitFor(o);
      return { data: { matched: 'text' } };
    }
    if (op.url !== undefined) {
      await page.waitForURL(op.url, { timeout: o.timeout });
      return { data: { matched: 'url' } };
    }
    await page.waitForLoadState(op.loadState ?? 'load', { timeout: o.timeout });
    return { data: { matched: 'loadState' } };
  }

  private async extract(
    op: Extract<PageOperation, { op: 'extract' }>,
    o: CallOptions,
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
            : await page.locator('body').innerText(o),
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
          content: await (scope ? scope.first() : page.locator(':root')).ariaSnapshot(o),
          matches: count,
        };
    }
  }

  private async download(selector: string, maxBytes: number, o: CallOptions): Promise<PageResult> {
    const event = this.page.waitForEvent('download', o);
    event.catch(() => undefined); // a failed click below must not leave this rejection unhandled
    await this.page.locator(selector).click(o);
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

const EMPTY_DOCUMENT =
  'document.head.childElementCount + document.body.childElementCount === 0 && document.body.textContent.trim() === ""';

/** What every Playwright call of an op gets: the op's timeout, and its signal where Playwright takes one. */
interface CallOptions {
  timeout: number;
  signal?: AbortSignal;
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
