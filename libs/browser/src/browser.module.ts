import { type DynamicModule, Module, type Provider } from '@nestjs/common';
import { BrowserRouter } from './browser-router';
import { BROWSER_OPTIONS } from './browser.constants';
import { type BrowserModuleOptions, resolveBrowserOptions } from './browser.options';
import { BrowserDriver } from './driver/browser-driver.port';
import { PlaywrightDriver } from './driver/playwright-driver';
import { WorkspaceFiles } from './workspace-files';

/**
 * The browser tier: `BrowserRouter` over a `BrowserDriver` (Playwright driving the system Chromium).
 * Global, imported once by the engine; needs `WorkspaceModule` (global) for the session workspaces.
 *
 * ```ts
 * BrowserModule.forRoot({ stateDir: '/var/lib/switchyard/browser', allowlist: ['10.0.0.0/8'] })
 * ```
 *
 * `providers` may replace the driver (`{ provide: BrowserDriver, useClass: FakeDriver }`), the DNS
 * resolver (`BROWSER_HOST_RESOLVER`) or the clock (`CLOCK` of `@switchyard/common`).
 */
@Module({})
export class BrowserModule {
  static forRoot(options: BrowserModuleOptions, overrides: Provider[] = []): DynamicModule {
    return {
      module: BrowserModule,
      global: true,
      providers: [
        // Resolved here, at boot, so a bad setting fails the start-up naming the setting.
        { provide: BROWSER_OPTIONS, useValue: resolveBrowserOptions(options) },
        { provide: BrowserDriver, useClass: PlaywrightDriver },
        WorkspaceFiles,
        BrowserRouter,
        ...overrides,
      ],
      exports: [BROWSER_OPTIONS, BrowserRouter],
    };
  }
}
