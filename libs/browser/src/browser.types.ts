import type {
  ActionError,
  EgressRecord,
  FileTouch,
  FinalActionStatus,
  RiskAssessment,
} from '@switchyard/common';

export const BROWSER_OPS = [
  'navigate',
  'click',
  'fill',
  'type',
  'press',
  'select',
  'hover',
  'check',
  'wait_for',
  'extract',
  'screenshot',
  'pdf',
  'download',
  'upload',
  'evaluate',
  'back',
  'forward',
  'reload',
  'new_tab',
  'switch_tab',
  'close_tab',
] as const;
export type BrowserOp = (typeof BROWSER_OPS)[number];

export const WAIT_UNTIL = ['load', 'domcontentloaded', 'networkidle', 'commit'] as const;
export type WaitUntil = (typeof WAIT_UNTIL)[number];
export const LOAD_STATES = ['load', 'domcontentloaded', 'networkidle'] as const;
export type LoadState = (typeof LOAD_STATES)[number];
export const SELECTOR_STATES = ['attached', 'detached', 'visible', 'hidden'] as const;
export type SelectorState = (typeof SELECTOR_STATES)[number];
export const EXTRACT_MODES = ['text', 'html', 'links', 'accessibility'] as const;
export type ExtractMode = (typeof EXTRACT_MODES)[number];
export const MOUSE_BUTTONS = ['left', 'right', 'middle'] as const;
export type MouseButton = (typeof MOUSE_BUTTONS)[number];

/** Fields any browser action may carry. */
export interface BrowserRequestCommon {
  /** Per-op timeout in ms (default: the tier's, 30 s). */
  timeoutMs?: number;
  /** Route the session to a dedicated browser (its own process and profile) from this action on. */
  needsFileAccess?: boolean;
  /** Same as `needsFileAccess`: the session wants a profile that survives browser restarts. */
  persistProfile?: boolean;
}

/** Page interactions that reach the driver exactly as the action gives them. */
export type PageInteraction =
  | { op: 'click'; selector: string; button?: MouseButton; clickCount?: number }
  | { op: 'fill'; selector: string; value: string }
  | { op: 'type'; selector: string; text: string; delayMs?: number }
  | { op: 'press'; key: string; selector?: string }
  | { op: 'select'; selector: string; values: string[] }
  | { op: 'hover'; selector: string }
  | {
      op: 'wait_for';
      selector?: string;
      state?: SelectorState;
      text?: string;
      url?: string;
      loadState?: LoadState;
    };

/** One browser action, as the router receives it (the HTTP body without `type`). */
export type BrowserRequest = BrowserRequestCommon &
  (
    | PageInteraction
    | { op: 'navigate'; url: string; waitUntil?: WaitUntil }
    | { op: 'check'; selector: string; checked?: boolean }
    | { op: 'extract'; mode: ExtractMode; selector?: string }
    | { op: 'screenshot'; path: string; fullPage?: boolean; selector?: string }
    | { op: 'pdf'; path: string }
    | { op: 'download'; selector: string; path: string }
    | { op: 'upload'; selector: string; path: string }
    | { op: 'evaluate'; script: string }
    | { op: 'back' | 'forward' | 'reload'; waitUntil?: WaitUntil }
    | { op: 'new_tab'; url?: string; waitUntil?: WaitUntil }
    | { op: 'switch_tab'; tabId: string }
    | { op: 'close_tab'; tabId?: string }
  );

/** Workspace-relative paths an action names, with the field each came from (for early path checks). */
export function requestPaths(req: BrowserRequest): { field: string; path: string }[] {
  if (req.op === 'screenshot' || req.op === 'pdf' || req.op === 'download' || req.op === 'upload') {
    return [{ field: 'path', path: req.path }];
  }
  return [];
}

/** The URL an action will open, if any. */
export function requestUrl(req: BrowserRequest): string | undefined {
  return req.op === 'navigate' || req.op === 'new_tab' ? req.url : undefined;
}

/** Why an action is routed to a dedicated browser. */
export function needsDedicatedBrowser(req: BrowserRequest): boolean {
  return (
    req.needsFileAccess === true ||
    req.persistProfile === true ||
    req.op === 'download' ||
    req.op === 'upload'
  );
}

/** A request the browser refused (policy), or a subresource that was blocked. */
export interface BlockedRequest {
  url: string;
  reason: string;
}

/** What an action returns in the envelope's `output`. */
export interface BrowserActionOutput {
  /** The tab the action ran in; null when the session has no open tab left (after `close_tab`). */
  tabId: string | null;
  url: string;
  title: string;
  /** HTTP status of the tab's last main-document response; null before any, or when it had none. */
  status: number | null;
  /** Where the session's browser runs. */
  route: 'shared' | 'dedicated';
  /** The op's own result (extracted content, evaluate's value, tab list…). */
  data?: Record<string, unknown>;
  /** Files the action wrote in the workspace. */
  artifacts?: { path: string; bytes: number; mimeType: string }[];
  /** Requests refused by the URL policy while the action ran. */
  blocked?: BlockedRequest[];
  /** Tabs opened by the page (popups) while the action ran. */
  openedTabs?: string[];
}

/** How a browser action ended, before the engine wraps it in the envelope. */
export interface BrowserOutcome {
  status: FinalActionStatus;
  output?: BrowserActionOutput;
  error?: ActionError;
  /** Workspace files read (upload) or written (screenshot, pdf, download). */
  files: FileTouch[];
  /** The connections its pages made to the session's own sandbox ports (`localhost`), allowed, with their bytes. */
  egress?: EgressRecord[];
}

/** What the router decides before anything runs: the risk, and a refusal when the action may not run. */
export interface BrowserPrecheck {
  risk: RiskAssessment;
  denial?: ActionError;
}

/** What the router needs to run one action. */
export interface BrowserJob {
  sessionId: string;
  /** Absolute workspace directory of the session. */
  workspaceDir: string;
  request: BrowserRequest;
}

/** What a person watching a session's browser sees: its current tab as a JPEG, with where it is. */
export interface BrowserView {
  image: Buffer;
  url: string;
  title: string;
  /** The tab's id, as the session's actions know it. */
  tab: string;
}

export interface BrowserAvailability {
  available: boolean;
  reason?: string;
  /** Live state, for `/health`. */
  shared?: 'running' | 'stopped';
  contexts?: number;
  dedicated?: number;
  maxContexts?: number;
}
