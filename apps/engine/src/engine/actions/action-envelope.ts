import { Inject, Injectable, Logger } from '@nestjs/common';
import {
  type ActionResult,
  type ActionType,
  BINARY_MIME_TYPES,
  CLOCK,
  type Clock,
  type DisplayResult,
  type EgressRecord,
} from '@switchyard/common';
import { SecretRedactor } from '../../platform/redaction/secret-redactor';
import type { Outcome } from './action-handler.port';

const EXCERPT_CHARS = 2048;
const DISPLAYED_LINES = 20;

/**
 * What a kernel cell displayed, one line per result for the graph's excerpt: its MIME types with their sizes, and
 * the workspace files of what was too big to inline (`[displayed image/png 2.1 KiB, text/plain 24 B]`).
 */
function displayed(output: unknown): string {
  const results = (output as { results?: unknown } | undefined)?.results;
  if (!Array.isArray(results) || results.length === 0) return '';
  const lines = (results as DisplayResult[]).slice(0, DISPLAYED_LINES).map((r) => {
    const parts = Object.entries(r.data).map(([mime, value]) => `${mime} ${sizeOf(mime, value)}`);
    for (const f of r.files ?? [])
      parts.push(`${f.mimeType} ${f.bytes} B in ${f.path ?? `no file: ${f.error}`}`);
    return `[${r.isMainResult ? 'result' : 'displayed'} ${parts.join(', ')}]`;
  });
  if (results.length > DISPLAYED_LINES) lines.push(`[… ${results.length - DISPLAYED_LINES} more]`);
  return lines.join('\n');
}

function sizeOf(mime: string, value: unknown): string {
  const bytes =
    typeof value !== 'string'
      ? Buffer.byteLength(JSON.stringify(value) ?? '')
      : BINARY_MIME_TYPES.has(mime)
        ? Math.floor((value.length * 3) / 4) - (value.endsWith('==') ? 2 : value.endsWith('=') ? 1 : 0)
        : Buffer.byteLength(value);
  return `${bytes} B`;
}

/** Where an action sits, for its envelope. */
export interface EnvelopeFields {
  id: string;
  sessionId: string;
  type: ActionType;
  startedAt: string;
  durationMs: number;
  requestId?: string;
  /** Connections the session's sandboxes asked the egress proxy for while it ran, and its own to its own ports. */
  egress?: EgressRecord[];
  /** The checkpoint taken before it ran, and the one it restored first. */
  checkpoint?: ActionResult['checkpoint'];
  restored?: ActionResult['restored'];
  /** What before-action hooks noted on it. */
  annotations?: ActionResult['annotations'];
}

/**
 * Turns an outcome into what leaves the engine: the result envelope (redacted), the graph's output excerpt and the
 * one log line per action. The same for every action type.
 */
@Injectable()
export class ActionEnvelopes {
  private readonly logger = new Logger('Action');

  constructor(
    @Inject(CLOCK) private readonly clock: Clock,
    private readonly redactor: SecretRedactor,
  ) {}

  envelope(at: EnvelopeFields, o: Outcome): ActionResult {
    // Code output was redacted by the tier as it streamed (before its caps); everything else is redacted here.
    const { run } = o;
    const output = o.output === undefined ? undefined : this.redactor.value(o.output);
    const error = o.error && this.redactor.value(o.error);
    const redacted = Boolean(run?.redacted || output?.redacted || error?.redacted);
    // The one place a run's output is laid out flat: the envelope's shape, which callers and the graph's record see.
    return {
      id: at.id,
      sessionId: at.sessionId,
      type: at.type,
      status: o.status,
      ...(run?.exitCode !== undefined && { exitCode: run.exitCode }),
      ...(run && { stdout: run.stdout, stderr: run.stderr }),
      ...(output !== undefined && { output: output.value }),
      truncated: run?.truncated ?? { stdout: false, stderr: false },
      durationMs: at.durationMs,
      startedAt: at.startedAt,
      endedAt: this.clock.now().toISOString(),
      tier: o.tier,
      risk: o.risk,
      ...(error && { error: error.value }),
      ...(redacted && { redacted: true }),
      ...(at.requestId !== undefined && { requestId: at.requestId }),
      ...(at.egress !== undefined && { egress: at.egress }),
      ...(o.hints !== undefined && o.hints.length > 0 && { hints: o.hints }),
      ...(at.checkpoint !== undefined && { checkpoint: at.checkpoint }),
      ...(at.restored !== undefined && { restored: at.restored }),
      ...(at.annotations !== undefined && { annotations: at.annotations }),
    };
  }

  /** What the graph keeps of the output: the head of stdout and the tail of stderr, or the op's data, or the error. */
  excerpt(r: ActionResult): string {
    if (r.stdout !== undefined || r.stderr !== undefined) {
      const out = (r.stdout ?? '').slice(0, EXCERPT_CHARS);
      const err = (r.stderr ?? '').slice(-EXCERPT_CHARS);
      const shown = displayed(r.output);
      return (err ? `${out}\n[stderr]\n${err}` : out) + (shown ? `\n${shown}` : '');
    }
    if (r.output !== undefined) return JSON.stringify(r.output).slice(0, EXCERPT_CHARS);
    return r.error?.message ?? '';
  }

  /** The one structured log line per action. */
  log(r: ActionResult, summary: string): void {
    this.logger.log({
      msg: 'action',
      sessionId: r.sessionId,
      actionId: r.id,
      type: r.type,
      tier: r.tier,
      risk: r.risk.level,
      riskScore: r.risk.score,
      command: summary,
      durationMs: r.durationMs,
      exitCode: r.exitCode,
      outputBytes: Buffer.byteLength(r.stdout ?? '') + Buffer.byteLength(r.stderr ?? ''),
      status: r.status,
      errorClass: r.error?.class,
      requestId: r.requestId,
    });
  }
}
