import { BROWSER_OPS } from '@switchyard/browser';
import { RequestValidationError } from '../../../platform/validation/request-validation.error';
import type { BrowserActionRequest } from '../../../state/actions/action-request';
import { BrowserActionHandler } from '../../handlers/browser-action.handler';
import { ACTION_DTO_CLASSES, parseActionBody, parseActionRequest } from './action-body';
import { BROWSER_ACTION_DTOS, type BrowserActionDto } from './browser-action.dto';

const problems = (body: Record<string, unknown>): { field: string; message: string }[] => {
  try {
    parseActionBody({ type: 'browser', ...body });
  } catch (e) {
    if (e instanceof RequestValidationError) return e.problems;
    throw e;
  }
  throw new Error('expected a validation error');
};
const browser = (body: Record<string, unknown>) =>
  parseActionBody({ type: 'browser', ...body }) as BrowserActionDto;

describe('browser action DTOs', () => {
  it('has one DTO per op, all in the OpenAPI list', () => {
    expect(Object.keys(BROWSER_ACTION_DTOS).sort()).toEqual([...BROWSER_OPS].sort());
    for (const cls of Object.values(BROWSER_ACTION_DTOS)) expect(ACTION_DTO_CLASSES).toContain(cls);
  });

  it.each<Record<string, unknown>>([
    { op: 'navigate', url: 'https://example.org', waitUntil: 'domcontentloaded', timeoutMs: 5000 },
    { op: 'navigate', url: 'file:///etc/passwd' },
    { op: 'click', selector: '#go', button: 'right', clickCount: 2 },
    { op: 'fill', selector: '#name', value: '' },
    { op: 'type', selector: '#q', text: 'hello', delayMs: 10 },
    { op: 'press', key: 'Enter' },
    { op: 'press', key: 'Control+A', selector: '#q' },
    { op: 'select', selector: '#c', values: ['a', 'b'] },
    { op: 'hover', selector: 'nav a' },
    { op: 'check', selector: '#agree', checked: false },
    { op: 'wait_for', selector: '#done', state: 'hidden' },
    { op: 'wait_for', text: 'Thanks' },
    { op: 'wait_for', url: '**/done' },
    { op: 'wait_for', loadState: 'networkidle' },
    { op: 'extract', mode: 'links' },
    { op: 'extract', mode: 'accessibility', selector: 'main' },
    { op: 'screenshot', path: 'shots/a.png', fullPage: true },
    { op: 'pdf', path: 'page.pdf' },
    { op: 'download', selector: 'a#csv', path: 'downloads/', needsFileAccess: true },
    { op: 'upload', selector: 'input[type=file]', path: 'in/a.txt' },
    { op: 'evaluate', script: 'document.title' },
    { op: 'back' },
    { op: 'forward', waitUntil: 'commit' },
    { op: 'reload' },
    { op: 'new_tab' },
    { op: 'new_tab', url: 'https://example.org', persistProfile: true },
    { op: 'switch_tab', tabId: 'tab_2' },
    { op: 'close_tab' },
  ])('accepts %j', (body) => {
    expect(browser(body)).toMatchObject(body);
  });

  it.each<[Record<string, unknown>, string[]]>([
    [{ op: 'fly' }, ['op']],
    [{}, ['op']],
    [{ op: 'navigate' }, ['url']],
    [{ op: 'navigate', url: 42 }, ['url']],
    [{ op: 'navigate', url: 'x'.repeat(9000) }, ['url']],
    [{ op: 'navigate', url: 'http://a', waitUntil: 'idle' }, ['waitUntil']],
    [{ op: 'navigate', url: 'http://a', timeoutMs: 0 }, ['timeoutMs']],
    [{ op: 'navigate', url: 'http://a', selector: '#x' }, ['selector']],
    [{ op: 'click', selector: '' }, ['selector']],
    [{ op: 'click', selector: 'a', clickCount: 9 }, ['clickCount']],
    [{ op: 'select', selector: '#c', values: [] }, ['values']],
    [{ op: 'select', selector: '#c', values: [1] }, ['values']],
    [{ op: 'wait_for' }, ['op']],
    [{ op: 'wait_for', text: 'a', url: 'b' }, ['op']],
    [{ op: 'extract' }, ['mode']],
    [{ op: 'screenshot' }, ['path']],
    [{ op: 'upload', path: 'a' }, ['selector']],
    [{ op: 'evaluate', script: '' }, ['script']],
    [{ op: 'switch_tab', tabId: '1' }, ['tabId']],
    [{ op: 'close_tab', tabId: 'tab_x' }, ['tabId']],
    [{ op: 'back', needsFileAccess: 'yes' }, ['needsFileAccess']],
  ])('rejects %j naming %j', (body, fields) => {
    expect(problems(body).map((p) => p.field)).toEqual(fields);
  });

  it('explains the wait_for rule', () => {
    expect(problems({ op: 'wait_for' })).toEqual([
      { field: 'op', message: 'wait_for needs exactly one of selector, text, url, loadState' },
    ]);
  });

  it('turns a body into the plain engine request, and the handler summarizes it', () => {
    const request = parseActionRequest({
      type: 'browser',
      op: 'screenshot',
      path: 'a.png',
      fullPage: true,
      timeoutMs: 100,
    }) as BrowserActionRequest;
    expect(request).toEqual({
      type: 'browser',
      op: 'screenshot',
      path: 'a.png',
      fullPage: true,
      timeoutMs: 100,
    });
    expect(Object.getPrototypeOf(request)).toBe(Object.prototype);
    // The summary needs no router: the handler's describing methods are pure.
    const handler = new BrowserActionHandler(undefined as never, undefined as never, undefined as never);
    expect(handler.summary(request)).toBe('screenshot a.png');
    const navigate = parseActionRequest({
      type: 'browser',
      op: 'navigate',
      url: 'https://example.org/\npath',
    });
    expect(handler.summary(navigate as BrowserActionRequest)).toBe('navigate https://example.org/ path');
    expect(handler.summary({ type: 'browser', op: 'back' })).toBe('back');
  });
});
