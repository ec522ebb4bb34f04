import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { Test } from '@nestjs/testing';
import { CLOCK } from '@switchyard/common';
import { WorkspaceManager, WorkspaceModule } from '@switchyard/workspace';
import {
  BROWSER_HOST_RESOLVER,
  BROWSER_OPTIONS,
  BrowserConfigError,
  BrowserDriver,
  BrowserModule,
  BrowserRouter,
  DEFAULT_LAUNCH_ARGS,
  resolveBrowserOptions,
  type ResolvedBrowserOptions,
} from './index';
import { FakeDriver } from './testing';

describe('resolveBrowserOptions', () => {
  it('fills documented defaults', () => {
    const o = resolveBrowserOptions({ stateDir: '/var/lib/sy/browser' });
    expect(o).toMatchObject({
      enabled: true,
      executablePath: '/usr/bin/chromium',
      launchArgs: DEFAULT_LAUNCH_ARGS,
      homeDir: '/var/lib/sy/browser/home',
      sessionsDir: '/var/lib/sy/browser/sessions',
      evaluate: false,
      defaultTimeoutMs: 30_000,
      maxContexts: 16,
      maxDedicated: 4,
      idleMs: 600_000,
      maxArtifactBytes: 50 * 1024 * 1024,
      outputMaxBytes: 1024 * 1024,
      prelaunch: false,
      timing: { deadlineGraceMs: 2000, housekeepingMs: 10_000, probeMs: 1000, crashWaitMs: 3000 },
    });
    expect(DEFAULT_LAUNCH_ARGS).toEqual(
      expect.arrayContaining(['--headless', '--no-sandbox', '--disable-quic']),
    );
  });

  it.each<[Parameters<typeof resolveBrowserOptions>[0], string]>([
    [{ stateDir: 'relative' }, 'browser.stateDir'],
    [{ stateDir: '/x', executablePath: 'chromium' }, 'browser.executablePath'],
    [
      { stateDir: '/x', allowlist: ['10.0.0.0/40'], allowlistSetting: 'SWITCHYARD_BROWSER_ALLOWLIST' },
      'SWITCHYARD_BROWSER_ALLOWLIST',
    ],
    [{ stateDir: '/x', maxContexts: 0 }, 'browser.maxContexts'],
    [{ stateDir: '/x', maxContexts: 2, maxDedicated: 3 }, 'browser.maxDedicated'],
    [{ stateDir: '/x', defaultTimeoutMs: 10, maxTimeoutMs: 5 }, 'browser.defaultTimeoutMs'],
    [{ stateDir: '/x', timing: { probeMs: -1 } }, 'browser.timing.probeMs'],
  ])('refuses %j naming %s', (input, setting) => {
    try {
      resolveBrowserOptions(input);
    } catch (err) {
      expect(err).toBeInstanceOf(BrowserConfigError);
      expect((err as BrowserConfigError).setting).toBe(setting);
      return;
    }
    throw new Error('expected a BrowserConfigError');
  });
});

describe('BrowserModule', () => {
  let tmp: string;
  beforeEach(() => {
    tmp = mkdtempSync(path.join(os.tmpdir(), 'sy-browsermod-'));
  });
  afterEach(() => rmSync(tmp, { recursive: true, force: true }));

  it('wires the router over a replaceable driver, resolver and clock, and cleans up on close', async () => {
    const driver = new FakeDriver();
    const moduleRef = await Test.createTestingModule({
      imports: [
        WorkspaceModule.forRoot({ root: path.join(tmp, 'ws'), sandboxUid: null }),
        BrowserModule.forRoot({ stateDir: path.join(tmp, 'browser'), allowlist: ['127.0.0.2'] }, [
          { provide: BrowserDriver, useValue: driver },
          {
            provide: BROWSER_HOST_RESOLVER,
            useValue: { lookup: async () => [{ address: '127.0.0.2', family: 4 }] },
          },
          { provide: CLOCK, useValue: { now: () => new Date(0), monotonic: () => 0 } },
        ]),
      ],
    }).compile();
    await moduleRef.init();
    expect(moduleRef.get<ResolvedBrowserOptions>(BROWSER_OPTIONS).allowlist.cidrs).toHaveLength(1);
    const router = moduleRef.get(BrowserRouter);
    const ws = await moduleRef.get(WorkspaceManager).create('s1');
    // The injected resolver answers for any name: intranet.test is 127.0.0.2, which is allowlisted.
    const out = await router.execute({
      sessionId: 's1',
      workspaceDir: ws,
      request: { op: 'navigate', url: 'http://intranet.test/' },
    });
    expect(out).toMatchObject({ status: 'succeeded', output: { url: 'http://intranet.test/' } });
    expect(existsSync(path.join(tmp, 'browser', 'sessions'))).toBe(true);
    await moduleRef.close();
    expect(driver.shared[0].closedByRouter).toBe(true);
    expect(existsSync(path.join(tmp, 'browser', 'sessions'))).toBe(false);
  });

  it('fails the boot on a bad option, naming it', () => {
    expect(() => BrowserModule.forRoot({ stateDir: tmp, allowlist: ['not a host'] })).toThrow(
      BrowserConfigError,
    );
  });
});
