import * as path from 'node:path';
import type { RiskAssessment } from '@switchyard/common';
import { BrowserConfigError } from './browser.errors';
import { DEFAULT_LAUNCH_ARGS } from './browser.constants';
import { type Allowlist, AllowlistEntryError, parseAllowlist } from '@switchyard/network';

const MiB = 1024 * 1024;

/** What `BrowserModule.forRoot` accepts. Only `stateDir` is required; every default is documented here. */
export interface BrowserModuleOptions {
  /**
   * Engine-private directory for browser state: each dedicated browser's profile and download directory
   * (`sessions/<id>/`) and the browsers' `HOME`. Never inside a workspace: sandboxed code must not be able
   * to plant links where the browser (running as the engine's user) reads and writes. Wiped at start-up.
   */
  stateDir: string;
  /** Off: the tier reports itself unavailable and browser actions are denied. Default true. */
  enabled?: boolean;
  /** Default `/usr/bin/chromium`. */
  executablePath?: string;
  /** Chromium flags. Default `DEFAULT_LAUNCH_ARGS`. */
  launchArgs?: readonly string[];
  /** Default 30 000 ms. */
  launchTimeoutMs?: number;
  /** Hosts, addresses and CIDRs the URL policy lets through (see `UrlPolicy`). Default none. */
  allowlist?: readonly string[];
  /** Name of the setting that holds the allowlist, quoted in refusals. Default `browser.allowlist`. */
  allowlistSetting?: string;
  /** Name of the setting that enables `evaluate`, quoted in refusals. Default `browser.evaluate`. */
  evaluateSetting?: string;
  /** Allow the `evaluate` op (page JavaScript, scored by `assessScript`). Default false. */
  evaluate?: boolean;
  /** Risk of an `evaluate` script; a `critical` one is refused. Default: no risk. */
  assessScript?: (script: string) => RiskAssessment;
  /** Per-op timeout when the action gives none. Default 30 000 ms. */
  defaultTimeoutMs?: number;
  /** Largest `timeoutMs` honoured (larger ones are clamped). Default 300 000 ms. */
  maxTimeoutMs?: number;
  /** Browser contexts open at once (shared contexts plus dedicated browsers). Default 16. */
  maxContexts?: number;
  /** Dedicated browser processes at once (each is a whole Chromium). Default 4. */
  maxDedicated?: number;
  /** A session's browser unused this long is closed (its next action starts afresh). Default 600 000 ms. */
  idleMs?: number;
  /** Largest screenshot, PDF, download or upload. Default 50 MiB. */
  maxArtifactBytes?: number;
  /** Cap on extracted text/html/snapshots and evaluate results, in bytes. Default 1 MiB. */
  outputMaxBytes?: number;
  /** Most links or matched elements one `extract` returns. Default 1000. */
  maxExtractItems?: number;
  /** Launch the shared browser at start-up instead of at the first action. Default false. */
  prelaunch?: boolean;
  /** Internal deadlines; tests shorten them. */
  timing?: Partial<BrowserTiming>;
}

/** How long the router waits on the browser beyond an op's own timeout. */
export interface BrowserTiming {
  /** Extra time a driver call gets past its own timeout before the router gives up on it. Default 2000 ms. */
  deadlineGraceMs: number;
  /** Bookkeeping calls (new page or context, close, cookies). Default 10 000 ms. */
  housekeepingMs: number;
  /** Quick probes: is the tab responsive, its title, closing a hung tab. Default 1000 ms. */
  probeMs: number;
  /** How long a `closed` failure waits for the browser's disconnection to be reported. Default 3000 ms. */
  crashWaitMs: number;
}

export interface ResolvedBrowserOptions {
  enabled: boolean;
  executablePath: string;
  launchArgs: readonly string[];
  launchTimeoutMs: number;
  stateDir: string;
  /** `HOME` of every browser process. */
  homeDir: string;
  /** Per-session profile and download directories of dedicated browsers. */
  sessionsDir: string;
  allowlist: Allowlist;
  allowlistSetting: string;
  evaluateSetting: string;
  evaluate: boolean;
  assessScript?: (script: string) => RiskAssessment;
  defaultTimeoutMs: number;
  maxTimeoutMs: number;
  maxContexts: number;
  maxDedicated: number;
  idleMs: number;
  maxArtifactBytes: number;
  outputMaxBytes: number;
  maxExtractItems: number;
  prelaunch: boolean;
  timing: BrowserTiming;
}

/** Applies defaults and fails loudly, naming the option, on anything that cannot work. */
export function resolveBrowserOptions(input: BrowserModuleOptions): ResolvedBrowserOptions {
  if (typeof input.stateDir !== 'string' || !path.isAbsolute(input.stateDir)) {
    throw new BrowserConfigError('browser.stateDir', 'must be an absolute path');
  }
  const executablePath = input.executablePath ?? '/usr/bin/chromium';
  if (!path.isAbsolute(executablePath)) {
    throw new BrowserConfigError(
      'browser.executablePath',
      `must be an absolute path, got "${executablePath}"`,
    );
  }
  const allowlistSetting = input.allowlistSetting ?? 'browser.allowlist';
  let allowlist: Allowlist;
  try {
    allowlist = parseAllowlist(input.allowlist ?? []);
  } catch (err) {
    if (err instanceof AllowlistEntryError) throw new BrowserConfigError(allowlistSetting, err.message);
    throw err;
  }
  const stateDir = path.resolve(input.stateDir);
  const resolved: ResolvedBrowserOptions = {
    enabled: input.enabled ?? true,
    executablePath,
    launchArgs: input.launchArgs ?? DEFAULT_LAUNCH_ARGS,
    launchTimeoutMs: input.launchTimeoutMs ?? 30_000,
    stateDir,
    homeDir: path.join(stateDir, 'home'),
    sessionsDir: path.join(stateDir, 'sessions'),
    allowlist,
    allowlistSetting,
    evaluateSetting: input.evaluateSetting ?? 'browser.evaluate',
    evaluate: input.evaluate ?? false,
    assessScript: input.assessScript,
    defaultTimeoutMs: input.defaultTimeoutMs ?? 30_000,
    maxTimeoutMs: input.maxTimeoutMs ?? 300_000,
    maxContexts: input.maxContexts ?? 16,
    maxDedicated: input.maxDedicated ?? 4,
    idleMs: input.idleMs ?? 600_000,
    maxArtifactBytes: input.maxArtifactBytes ?? 50 * MiB,
    outputMaxBytes: input.outputMaxBytes ?? MiB,
    maxExtractItems: input.maxExtractItems ?? 1000,
    prelaunch: input.prelaunch ?? false,
    timing: {
      deadlineGraceMs: 2000,
      housekeepingMs: 10_000,
      probeMs: 1000,
      crashWaitMs: 3000,
      ...input.timing,
    },
  };
  const positive: [string, number][] = [
    ['launchTimeoutMs', resolved.launchTimeoutMs],
    ['defaultTimeoutMs', resolved.defaultTimeoutMs],
    ['maxTimeoutMs', resolved.maxTimeoutMs],
    ['maxContexts', resolved.maxContexts],
    ['maxDedicated', resolved.maxDedicated],
    ['idleMs', resolved.idleMs],
    ['maxArtifactBytes', resolved.maxArtifactBytes],
    ['outputMaxBytes', resolved.outputMaxBytes],
    ['maxExtractItems', resolved.maxExtractItems],
    ['timing.deadlineGraceMs', resolved.timing.deadlineGraceMs],
    ['timing.housekeepingMs', resolved.timing.housekeepingMs],
    ['timing.probeMs', resolved.timing.probeMs],
    ['timing.crashWaitMs', resolved.timing.crashWaitMs],
  ];
  for (const [name, value] of positive) {
    if (!Number.isSafeInteger(value) || value <= 0) {
      throw new BrowserConfigError(`browser.${name}`, `must be a positive integer, got ${String(value)}`);
    }
  }
  if (resolved.defaultTimeoutMs > resolved.maxTimeoutMs) {
    throw new BrowserConfigError('browser.defaultTimeoutMs', 'must not exceed maxTimeoutMs');
  }
  if (resolved.maxDedicated > resolved.maxContexts) {
    throw new BrowserConfigError('browser.maxDedicated', 'must not exceed maxContexts');
  }
  return resolved;
}
