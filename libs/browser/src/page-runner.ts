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
import type { SessionBrowser } from './session-browser';
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
    const ctx: RunContext = { ...run, mark: run.sb.mark };
    let tabId: string | undefined;
    try {
      const done = await this.perform(ctx, signal);
      tabId = done.tabId;
      return await this.finish(ctx, done);
    } catch (err) {
      tabId ??= ctx.sb.current;
      return await this.failure(ctx, err, tabId);
    }
  }

  /** Runs the op on the session's browser; tab ops are handled by `SessionTabs`, not the driver. */
  private async perform(ctx: RunContext, signal?: AbortSignal): Promise<Performed> {
    const { sb, job, timeoutMs, upload } = ctx;
    const req = job.request;
    if (req.op === 'new_tab') {
      const { id, page } = await this.tabs.open(sb, signal);
      const result =
        req.url !== undefined
          ? await this.pageCall(
              page,
              { op: 'navigate', url: req.url, waitUntil: req.waitUntil ?? 'load' },
              timeoutMs,
              signal,
            )
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
    const page = sb.tabs.get(tabId)!;
    const result = await this.pageCall(page, pageOperation(req, this.options, upload), timeoutMs, signal);
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
   * One driver call under a hard deadline (its own timeout plus a grace period). A call that overruns it
   * leaves a tab that may be hung: `failure` checks and drops it, so the session is never wedged.
   */
  private async pageCall(
    page: DriverPage,
    op: PageOperation,
    timeoutMs: number,
    signal?: AbortSignal,
  ): Promise<PageResult> {
    // evaluate and pdf have no timeout of their own: the deadline is theirs, without grace.
    const grace = op.op === 'evaluate' || op.op === 'pdf' ? 0 : this.timing.deadlineGraceMs;
    return bounded(page.perform(op, timeoutMs), timeoutMs + grace, signal);
  }

  /** Builds the successful (or policy-refused) outcome. */
  private async finish(ctx: RunContext, done: Performed): Promise<BrowserOutcome> {
    const { sb } = ctx;
    const opened = sb.syncTabs();
    const refusals = sb.since(ctx.mark);
    const output = await this.output(ctx, done.tabId, {
      title: done.result.title,
      data: capData(done.result.data, this.options.outputMaxBytes),
      artifacts: done.artifacts,
      openedTabs: opened,
    });
    if (done.result.egressDenied) {
      // The main document is the proxy's refusal (a redirect hop to a refused host, typically).
      const r = refusals.filter((e) => e.source === 'proxy').pop();
      return {
        status: 'denied',
        output,
        error: {
          class: 'policy',
          code: r?.code ?? 'ADDRESS_REFUSED',
          message: r ? `refused ${r.url}: ${r.reason}` : 'the navigation was refused by the URL policy',
        },
        files: done.files,
      };
    }
    return { status: 'succeeded', output, files: done.files };
  }

  /** Maps a failed op to its outcome. */
  private async failure(ctx: RunContext, err: unknown, tabId: string | undefined): Promise<BrowserOutcome> {
    const { sb, job, timeoutMs } = ctx;
    const op = job.request.op;
    if (err instanceof PathRejectedError) throw err;
    if (err instanceof AbortedError) return aborted(err);
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
        return this.withOutput(ctx, tabId, {
          status: 'denied',
          error: { class: 'policy', code: r.code, message: `refused ${r.url}: ${r.reason}` },
        });
      }
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
    const blocked = sb
      .since(ctx.mark)
      .slice(-BLOCKED_IN_OUTPUT)
      .map(({ url, reason }) => ({ url, reason }));
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
