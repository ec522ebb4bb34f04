import { cleanMessage } from './playwright-errors';

describe('cleanMessage', () => {
  it("drops Playwright's call log in either layout, and its colours", () => {
    expect(
      cleanMessage(
        new Error(
          "locator.click: Timeout 50ms exceeded.\nCall log:\n\x1b[2m  - waiting for locator('#x')\x1b[22m\n",
        ),
      ),
    ).toBe('locator.click: Timeout 50ms exceeded.');
    expect(
      cleanMessage(
        new Error(
          'page.waitForEvent: Timeout 8000ms exceeded while waiting for event "download"\n' +
            '=========================== logs ===========================\nwaiting for event "download"\n' +
            '============================================================',
        ),
      ),
    ).toBe('page.waitForEvent: Timeout 8000ms exceeded while waiting for event "download"');
    expect(cleanMessage('plain')).toBe('plain');
  });
});
