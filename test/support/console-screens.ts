import { existsSync, mkdirSync, renameSync } from 'node:fs';
import * as path from 'node:path';
import type { BrowserContext, Locator, Page } from 'playwright-core';

/**
 * Where the console e2e tests save what each page looked like: `<name>.png`, and the run before's as
 * `<name>.prev.png`, so a person (or a reviewer) compares the two, not only the DOM.
 */
export const SCREENS = path.join(__dirname, '..', '..', '.runtime', 'console-screens');

/** The two widths every page is checked at: a laptop and a phone. */
export const WIDE = { width: 1280, height: 900 };
export const PHONE = { width: 390, height: 844 };

/** Saves a screenshot of the page (or of one element) as `<name>.png`, keeping the last run's as `.prev.png`. */
export async function screen(target: Page | Locator, name: string): Promise<string> {
  mkdirSync(SCREENS, { recursive: true });
  const file = path.join(SCREENS, `${name}.png`);
  if (existsSync(file)) renameSync(file, path.join(SCREENS, `${name}.prev.png`));
  if ('goto' in target) await target.screenshot({ path: file, fullPage: true });
  else await target.screenshot({ path: file });
  return file;
}

/** A browser context at a laptop's or a phone's size (a phone's as a mobile browser: viewport meta, touch). */
export function contextAt(
  browser: { newContext: (options: object) => Promise<BrowserContext> },
  size: typeof WIDE | typeof PHONE,
): Promise<BrowserContext> {
  return browser.newContext({ viewport: size, isMobile: size.width < 500, hasTouch: size.width < 500 });
}

/** How far the page is wider than its window (0 when it does not scroll sideways), and which elements stick out. */
export function overflow(page: Page): Promise<{ scrollWidth: number; clientWidth: number; wide: string[] }> {
  // A string, evaluated in the page: this project's tests compile without the DOM's types.
  return page.evaluate(`(() => {
    const root = document.documentElement;
    const wide = [...document.querySelectorAll('body *')]
      .filter((el) => el.getBoundingClientRect().right > root.clientWidth + 0.5)
      .slice(0, 5)
      .map((el) => el.tagName.toLowerCase() + (el.className && typeof el.className === 'string' ? '.' + el.className.split(' ').join('.') : ''));
    return { scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, wide };
  })()`);
}
