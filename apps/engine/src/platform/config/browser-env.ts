import { AllowlistEntryError, parseAllowlist } from '@switchyard/network';
import { configFailure } from './config-error';
import { AbsolutePathVar, BoolVar, IntVar, ListVar, MiB } from './env-parsing';

/** The browser tier: the Chromium it runs, what pages may reach, and its limits. */
export class BrowserEnv {
  /** Off: `/health` reports the browser tier unavailable and browser actions are denied. */
  @BoolVar()
  SWITCHYARD_BROWSER_ENABLED = true;

  /** The Chromium binary the browser tier drives. */
  @AbsolutePathVar()
  SWITCHYARD_BROWSER_EXECUTABLE = '/usr/bin/chromium';

  /**
   * IP addresses, CIDRs, hostnames and `*.domain` wildcards browsed pages may reach although they are not public,
   * comma-separated.
   */
  @ListVar()
  SWITCHYARD_BROWSER_ALLOWLIST: string[] = [];

  /** Allow the `evaluate` op (page JavaScript, scored by the risk policy). */
  @BoolVar()
  SWITCHYARD_BROWSER_EVALUATE = false;

  /** Browser contexts open at once (shared-browser contexts plus dedicated browsers). */
  @IntVar(1, 1000)
  SWITCHYARD_BROWSER_MAX_CONTEXTS = 16;

  /** Dedicated browser processes at once. */
  @IntVar(1, 256)
  SWITCHYARD_BROWSER_MAX_DEDICATED = 4;

  /** Timeout of a browser op when the action gives none. */
  @IntVar(100, 3_600_000)
  SWITCHYARD_BROWSER_TIMEOUT_MS = 30_000;

  /** A session's browser context unused this long is closed. */
  @IntVar(1000, 2 ** 31 - 1)
  SWITCHYARD_BROWSER_IDLE_MS = 600_000;

  /** Largest screenshot, PDF, download or upload. */
  @IntVar(1024)
  SWITCHYARD_BROWSER_MAX_ARTIFACT_BYTES = 50 * MiB;

  /** Start the shared browser at boot instead of at the first browser action. */
  @BoolVar()
  SWITCHYARD_BROWSER_PRELAUNCH = false;
}

export interface BrowserConfig {
  enabled: boolean;
  executablePath: string;
  allowlist: string[];
  evaluate: boolean;
  maxContexts: number;
  maxDedicated: number;
  timeoutMs: number;
  idleMs: number;
  maxArtifactBytes: number;
  prelaunch: boolean;
}

/** The allowlist is parsed here too, so a bad entry stops start-up naming the variable. */
function checkAllowlist(entries: string[]): void {
  try {
    parseAllowlist(entries);
  } catch (err) {
    if (err instanceof AllowlistEntryError) {
      configFailure('SWITCHYARD_BROWSER_ALLOWLIST', err.message);
    }
    throw err;
  }
}

export function browserConfig(env: BrowserEnv): BrowserConfig {
  checkAllowlist(env.SWITCHYARD_BROWSER_ALLOWLIST);
  return {
    enabled: env.SWITCHYARD_BROWSER_ENABLED,
    executablePath: env.SWITCHYARD_BROWSER_EXECUTABLE,
    allowlist: env.SWITCHYARD_BROWSER_ALLOWLIST,
    evaluate: env.SWITCHYARD_BROWSER_EVALUATE,
    maxContexts: env.SWITCHYARD_BROWSER_MAX_CONTEXTS,
    maxDedicated: env.SWITCHYARD_BROWSER_MAX_DEDICATED,
    timeoutMs: env.SWITCHYARD_BROWSER_TIMEOUT_MS,
    idleMs: env.SWITCHYARD_BROWSER_IDLE_MS,
    maxArtifactBytes: env.SWITCHYARD_BROWSER_MAX_ARTIFACT_BYTES,
    prelaunch: env.SWITCHYARD_BROWSER_PRELAUNCH,
  };
}
