import type { ActionError, FileTouch } from '@switchyard/common';
import { FileOpError, PathRejectedError } from '@switchyard/workspace';
import { PageOperationError } from './browser.errors';
import type { ResolvedBrowserOptions } from './browser.options';
import type {
  BrowserActionOutput,
  BrowserJob,
  BrowserOutcome,
  BrowserRequest,
  WaitUntil,
} from './browser.types';
import type { DriverPage, PageOperation, PageResult } from './driver/browser-driver.port';
import { aborted, capData, clip, mimeTypeOf, safeName } from './browser-output';
import type { BrowserPool } from './browser-pool';
import { AbortedError, bounded, DeadlineError } from './deadlines';
import {
  PortUnreachableError,
  type RefusalEntry,
  RequestRefusedError,
  type SessionBrowser,
  type UnreachableEntry,
} from './session-browser';
import type { SessionTabs } from './session-tabs';
import type { WorkspaceFiles } from './workspace-files';

/** Refusals listed in one action's output. */
const BLOCKED_IN_OUTPUT = 20;
const TAB_OPS: readonly BrowserRequest['op'][] = ['new_tab', 'switch_tab', 'close_tab'];

/** An upload's file, read from the workspace before the browser is touched. */
export type Upload = Awaited<ReturnType<WorkspaceFiles['read']>>;

/** One action on the session's browser, as `PageRunner.run` takes it. */
export interface PageRun {
  sb: SessionBrowser;
  job: BrowserJob;
  /** The op's own timeout, already clamped. */
  timeoutMs: number;
  upload?: Upload;
}

/** A run, with where the session's refusal log stood when it began (what is later is this action's). */
interface RunContext extends PageRun {
  mark: number;
  /** The tabs open when the action began: one opened since (`new_tab`, a popup) is the action's own. */
  before: ReadonlySet<DriverPage>;
  /** The tab the action runs in, once known. */
  tab?: DriverPage;
  /** The page op's signal: the action's, and fired by a refusal of the action's own document. */
  opSignal: AbortSignal;
}

/** What `perform` hands to `finish`. */
interface Performed {
  tabId: string | undefined;
  result: PageResult;
  files: FileTouch[];
  artifacts?: BrowserActionOutput['artifacts'];
}

/**
 * Runs one action on a session's browser and turns what happened into its outcome: the page op (or tab
 * op) under a hard deadline, artifacts written to the workspace, refusals attributed to the action, and
 * every failure classified (policy refusal, timeout with the hung tab dropped, crashed browser, closed
 * tab, page error). Never rejects for what the page, the network or the policy did.
 *
 * When the URL policy refuses the main document of the action's tab (or of a tab it opened) while the
 * action runs, the action ends `denied` at once: its navigation would only show an error page, its
 * download would never start, and waiting on would only wait out the timeout.
 */
export class PageRunner {
  private readonly timing: ResolvedBrowserOptions['timing'];

  constructor(
    private readonly options: ResolvedBrowserOptions,
    private readonly files: WorkspaceFiles,
    private readonly pool: BrowserPool,
    private readonly tabs: SessionTabs,
  ) {
    this.timing = options.timing;
  }

  /** Rejects only with `PathRejectedError` (a workspace path that must not be used) and engine faults. */
  async run(run: PageRun, signal?: AbortSignal): Promise<BrowserOutcome> {
    const refused = new AbortController();
    const ctx: RunContext = {
      ...run,
      mark: run.sb.mark,
      before: new Set(run.sb.context.pages()),
      opSignal: signal ? AbortSignal.any([signal, refused.signal]) : refused.signal,
    };
    const unwatch = ctx.sb.watch((e) => {
      if (ownRefusal(ctx, e)) refused.abort(new RequestRefusedError(e));
    });
    let tabId: string | undefined;
    let outcome: BrowserOutcome;
    try {
      const done = await this.perform(ctx, signal);
      tabId = done.tabId;
      outcome = await this.finish(ctx, done);
    } catch (err) {
      tabId ??= ctx.sb.current;
      outcome = await this.failure(ctx, err, tabId);
    } finally {
      unwatch();
    }
    const egress = ctx.sb.takeLocalEgress();
    return egress.length > 0 ? { ...outcome, egress } : outcome;
  }

  /** Runs the op on the session's browser; tab ops are handled by `SessionTabs`, not the driver. */
  private async perform(ctx: RunContext, signal?: AbortSignal): Promise<Performed> {
    const { sb, job, upload } = ctx;
    const req = job.request;
    if (req.op === 'new_tab') {
      const { id, page } = await this.tabs.open(sb, signal);
      ctx.tab = page;
      const result =
        req.url !== undefined
          ? await this.pageCall(ctx, { op: 'navigate', url: req.url, waitUntil: req.waitUntil ?? 'load' })
          : {};
      return { tabId: id, result, files: [] };
    }
    if (req.op === 'switch_tab') {
      await this.tabs.switchTo(sb, req.tabId);
      return { tabId: req.tabId, result: {}, files: [] };
    }
    if (req.op === 'close_tab') {
      const closed = await this.tabs.close(sb, req.tabId, signal);
      return { tabId: sb.current, result: { data: { closed } }, files: [] };
    }
    const tabId = await this.tabs.current(sb, signal);
    ctx.tab = sb.tabs.get(tabId)!;
    if (needsContent(req) && (await ctx.tab.blank(this.timing.probeMs))) {
      throw new PageOperationError(
        'selector',
        'PAGE_NOT_LOADED',
        `${req.op} needs a page, but the tab has no page loaded (about:blank): navigate first`,
      );
    }
    const result = await this.pageCall(ctx, pageOperation(req, this.options, upload));
    const files: FileTouch[] = [];
    let artifacts: BrowserActionOutput['artifacts'];
    if (upload) files.push({ path: upload.realRel, access: 'read' });
    if (result.bytes && (req.op === 'screenshot' || req.op === 'pdf' || req.op === 'download')) {
      let target = req.path;
      if (req.op === 'download' && target.endsWith('/')) target += safeName(result.suggestedName);
      if (result.bytes.length > this.options.maxArtifactBytes) {
        throw new FileOpError(
          'FILE_TOO_LARGE',
          `the ${req.op} is ${result.bytes.length} bytes, over the ${this.options.maxArtifactBytes}-byte artifact cap`,
        );
      }
      const realRel = await this.files.write(job.sessionId, job.workspaceDir, target, result.bytes);
      files.push({ path: realRel, access: 'write' });
      artifacts = [
        {
          path: realRel,
          bytes: result.bytes.length,
          mimeType: result.mimeType ?? 'application/octet-stream',
        },
      ];
    }
    return { tabId, result, files, artifacts };
  }

  /**
   * One driver call in the action's tab under a hard deadline (its own timeout plus a grace period), and
   * stopped at once by a refusal of the action's own document. A call that overruns the deadline leaves a
   * tab that may be hung: `failure` checks and drops it, so the session is never wedged. Rejects with
   * `RequestRefusedError` when the document the call came back with is the egress proxy's refusal.
   */
  private async pageCall(ctx: RunContext, op: PageOperation): Promise<PageResult> {
    const { timeoutMs, opSignal } = ctx;
    // evaluate and pdf have no timeout of their own: the deadline is theirs, without grace.
    const grace = op.op === 'evaluate' || op.op === 'pdf' ? 0 : this.timing.deadlineGraceMs;
    const call = ctx.tab!.perform(op, timeoutMs, opSignal);
    let result: PageResult;
    try {
      result = await bounded(call, timeoutMs + grace, opSignal);
    } catch (err) {
      // Stopped by a refusal: the driver answers once the refused document has landed, so what comes with
      // it (the proxy's refusal, Chromium's retries) is this action's, not the next one's.
      if (refusalOf(err)) await bounded(call, this.timing.deadlineGraceMs).catch(() => undefined);
      throw err;
    }
    if (result.egressDenied) {
      // The main document is the proxy's refusal (a redirect hop to a refused host, typically).
      const r = ctx.sb
        .since(ctx.mark)
        .filter((e) => e.source === 'proxy')
        .pop();
      throw new RequestRefusedError(
        r ?? { url: ctx.tab!.url(), reason: 'the egress proxy refused it', code: 'ADDRESS_REFUSED' },
      );
    }
    if (result.egressUnreachable) {
      // The main document is the proxy's answer that the session's own port could not be opened.
      const u = ctx.sb.unreachableSince(ctx.mark).pop();
      throw new PortUnreachableError(
        u ?? {
          target: ctx.tab!.url(),
          message: "the session's port could not be reached",
          code: 'PORT_CLOSED',
        },
      );
    }
    return result;
  }

  /** Builds the successful outcome. */
  private async finish(ctx: RunContext, done: Performed): Promise<BrowserOutcome> {
    const opened = ctx.sb.syncTabs();
    const output = await this.output(ctx, done.tabId, {
      title: done.result.title,
      data: capData(done.result.data, this.options.outputMaxBytes),
      artifacts: done.artifacts,
      openedTabs: opened,
    });
    return { status: 'succeeded', output, files: done.files };
  }

  /** Maps a failed op to its outcome. */
  private async failure(ctx: RunContext, err: unknown, tabId: string | undefined): Promise<BrowserOutcome> {
    const { sb, job, timeoutMs } = ctx;
    const op = job.request.op;
    if (err instanceof PathRejectedError) throw err;
    const refused = refusalOf(err);
    if (refused) return this.withOutput(ctx, tabId, { status: 'denied', error: refused });
    if (err instanceof AbortedError) return aborted(err);
    if (err instanceof PortUnreachableError) {
      return this.withOutput(ctx, tabId, { status: 'failed', error: unreachable(err.entry) });
    }
    if (err instanceof FileOpError) {
      return this.withOutput(ctx, tabId, {
        status: 'failed',
        error: { class: err.errorClass, code: err.code, message: err.message },
      });
    }
    if (
      sb.dead ||
      (err instanceof PageOperationError && err.failure === 'closed' && (await this.pool.browserGone(sb)))
    ) {
      await this.pool.dispose(sb);
      return {
        status: 'error',
        error: {
          class: 'internal',
          code: 'BROWSER_CRASHED',
          message:
            `the ${sb.route} browser exited during ${op} (crash or kill); its tabs are lost. ` +
            'The next action starts a new browser.',
        },
        files: [],
      };
    }
    if (err instanceof DeadlineError || (err instanceof PageOperationError && err.failure === 'timeout')) {
      const dropped = tabId !== undefined && (await this.tabs.dropIfHung(sb, tabId));
      const why =
        err instanceof PageOperationError ? err.message : `${op} did not finish within ${timeoutMs} ms`;
      return this.withOutput(ctx, dropped ? undefined : tabId, {
        status: 'timed_out',
        error: {
          class: 'timeout',
          code: 'TIMEOUT',
          message: dropped ? `${why}; the tab stopped responding and was closed` : why,
        },
      });
    }
    if (err instanceof PageOperationError) {
      const refusals = sb.since(ctx.mark);
      // Only the action's own document counts: a refused image does not make a failed navigation a refusal.
      const causes = refusals.filter((e) => e.mainFrameNavigation || e.source === 'proxy');
      if (err.failure === 'navigation' && causes.length > 0) {
        const r = causes.find((e) => e.mainFrameNavigation) ?? causes[causes.length - 1];
        return this.withOutput(ctx, tabId, { status: 'denied', error: denial(r) });
      }
      // A tunnel (https, a redirect hop) to the session's own port that could not be opened.
      const closed = err.failure === 'navigation' ? sb.unreachableSince(ctx.mark).pop() : undefined;
      if (closed) return this.withOutput(ctx, tabId, { status: 'failed', error: unreachable(closed) });
      if (err.failure === 'closed') {
        return this.withOutput(ctx, undefined, {
          status: 'failed',
          error: {
            class: 'validation',
            code: 'TAB_CLOSED',
            message: `the tab closed during ${op}: ${err.message}`,
          },
        });
      }
      const errorClass = err.failure === 'limit' ? 'limit' : 'validation';
      return this.withOutput(ctx, tabId, {
        status: 'failed',
        error: { class: errorClass, code: err.code, message: err.message },
      });
    }
    throw err;
  }

  private async withOutput(
    ctx: RunContext,
    tabId: string | undefined,
    outcome: { status: BrowserOutcome['status']; error: ActionError },
  ): Promise<BrowserOutcome> {
    ctx.sb.syncTabs();
    const output = ctx.sb.dead ? undefined : await this.output(ctx, tabId, {}).catch(() => undefined);
    return { ...outcome, ...(output && { output }), files: [] };
  }

  private async output(
    ctx: RunContext,
    tabId: string | undefined,
    extra: Pick<BrowserActionOutput, 'data' | 'artifacts' | 'openedTabs'> & { title?: string },
  ): Promise<BrowserActionOutput> {
    const { sb } = ctx;
    const page = tabId === undefined ? undefined : sb.tabs.get(tabId);
    // The guard and the proxy may both refuse the same redirect hop: listed once.
    const blocked = [
      ...new Map(
        sb.since(ctx.mark).map(({ url, reason }) => [`${url}\n${reason}`, { url, reason }]),
      ).values(),
    ].slice(-BLOCKED_IN_OUTPUT);
    const tabs = [...sb.tabs.entries()].map(([id, p]) => ({ id, url: p.url() }));
    const data = TAB_OPS.includes(ctx.job.request.op) ? { ...extra.data, tabs } : extra.data;
    return {
      tabId: page ? tabId! : null,
      url: clip(page?.url() ?? '', 8192),
      title: clip(page ? (extra.title ?? (await page.title(this.timing.probeMs))) : '', 1024),
      status: page?.status() ?? null,
      route: sb.route,
      ...(data && { data }),
      ...(extra.artifacts && { artifacts: extra.artifacts }),
      ...(blocked.length > 0 && { blocked }),
      ...(extra.openedTabs && extra.openedTabs.length > 0 && { openedTabs: extra.openedTabs }),
    };
  }
}

/**
 * Whether a refusal is of the action's own document: a top-level navigation of its tab or of a tab opened
 * while it ran (one whose tab is unknown counts too). Subresources and other tabs do not stop it.
 */
function ownRefusal(ctx: RunContext, e: RefusalEntry): boolean {
  if (!e.mainFrameNavigation) return false;
  return e.page === undefined || e.page === ctx.tab || !ctx.before.has(e.page);
}

/** The refusal that stopped an action, from the abort it caused or thrown as it is. */
function refusalOf(err: unknown): ActionError | undefined {
  const reason = err instanceof AbortedError ? err.cause : err;
  return reason instanceof RequestRefusedError ? denial(reason.refusal) : undefined;
}

function denial(r: Pick<RefusalEntry, 'url' | 'reason' | 'code'>): ActionError {
  return { class: 'policy', code: r.code, message: `refused ${r.url}: ${r.reason}` };
}

/** A session's own port that could not be opened: what happened, and what `localhost` means here. */
function unreachable(u: Pick<UnreachableEntry, 'target' | 'message' | 'code'>): ActionError {
  return {
    class: 'validation',
    code: u.code,
    message: `could not open ${u.target}: ${u.message} (in the browser, localhost is this session's own sandbox)`,
  };
}

/**
 * Ops that act on an element or wait for content: on a tab that never loaded a page they could only wait
 * out their timeout.
 */
function needsContent(req: BrowserRequest): boolean {
  switch (req.op) {
    case 'click':
    case 'fill':
    case 'type':
    case 'select':
    case 'hover':
    case 'check':
    case 'download':
    case 'upload':
      return true;
    case 'press':
    case 'extract':
    case 'screenshot':
      return req.selector !== undefined;
    case 'wait_for':
      return req.selector !== undefined || req.text !== undefined;
    case 'navigate':
    case 'back':
    case 'forward':
    case 'reload':
    case 'pdf':
    case 'evaluate':
    case 'new_tab':
    case 'switch_tab':
    case 'close_tab':
      return false;
  }
}

/** The driver's operation for a page op: defaults applied, caps attached, the upload's bytes in place of its path. */
function pageOperation(
  req: BrowserRequest,
  limits: Pick<ResolvedBrowserOptions, 'maxExtractItems' | 'maxArtifactBytes'>,
  upload?: Upload,
): PageOperation {
  const wait = (w?: WaitUntil): WaitUntil => w ?? 'load';
  switch (req.op) {
    case 'navigate':
      return { op: 'navigate', url: req.url, waitUntil: wait(req.waitUntil) };
    case 'back':
    case 'forward':
    case 'reload':
      return { op: req.op, waitUntil: wait(req.waitUntil) };
    case 'click':
      return { op: 'click', selector: req.selector, button: req.button, clickCount: req.clickCount };
    case 'fill':
      return { op: 'fill', selector: req.selector, value: req.value };
    case 'type':
      return { op: 'type', selector: req.selector, text: req.text, delayMs: req.delayMs };
    case 'press':
      return { op: 'press', key: req.key, selector: req.selector };
    case 'select':
      return { op: 'select', selector: req.selector, values: req.values };
    case 'hover':
      return { op: 'hover', selector: req.selector };
    case 'check':
      return { op: 'check', selector: req.selector, checked: req.checked ?? true };
    case 'wait_for':
      return {
        op: 'wait_for',
        selector: req.selector,
        state: req.state,
        text: req.text,
        url: req.url,
        loadState: req.loadState,
      };
    case 'extract':
      return { op: 'extract', mode: req.mode, selector: req.selector, maxItems: limits.maxExtractItems };
    case 'screenshot':
      return { op: 'screenshot', fullPage: req.fullPage ?? false, selector: req.selector };
    case 'pdf':
      return { op: 'pdf' };
    case 'download':
      return { op: 'download', selector: req.selector, maxBytes: limits.maxArtifactBytes };
    case 'upload':
      return {
        op: 'upload',
        selector: req.selector,
        file: { name: upload!.name, mimeType: mimeTypeOf(upload!.name), buffer: upload!.buffer },
      };
    case 'evaluate':
      return { op: 'evaluate', script: req.script };
    case 'new_tab':
    case 'switch_tab':
    case 'close_tab':
      throw new Error(`${req.op} is not a page operation`);
  }
}
