import type { UrlRefusal } from '../url-policy/url-policy';
import type { EgressAttempt, EgressProxyOptions, EgressRefusal, LocalRoute } from './egress-proxy.types';
import { printable } from './proxy-answers';

/** One allowed connection and its bytes so far; `end` reports it once. */
export interface Tally {
  seq: number;
  via: EgressRefusal['via'];
  host: string;
  port: number;
  /** The local route it took, if any. */
  local?: LocalRoute;
  /** Why its local route could not be opened. */
  failure?: string;
  bytesIn: number;
  bytesOut: number;
  startedAt: number;
  done: boolean;
  end?: () => void;
}

/** The attempt a connection is reported as: allowed; by a local route, with where it went (and why it failed). */
function attemptOf(t: Tally, endedAt: number): EgressAttempt {
  return {
    seq: t.seq,
    via: t.via,
    host: t.host,
    port: t.port,
    allowed: true,
    ...(t.local && {
      local: true,
      reason: t.failure === undefined ? t.local.reason : `${t.local.reason}: ${t.failure}`,
    }),
    bytesIn: t.bytesIn,
    bytesOut: t.bytesOut,
    startedAt: t.startedAt,
    endedAt,
  };
}

/**
 * The egress proxy's record of what went through it: every attempt numbered (`seq`), a refusal reported at once
 * (`onRefusal`, `onAttempt`), an allowed connection reported when it ends with its bytes, and those still open known.
 */
export class EgressLedger {
  /** Allowed connections still open. */
  private readonly inFlight = new Set<Tally>();
  /** The last attempt's `seq`. */
  private seq = 0;

  constructor(private readonly options: Pick<EgressProxyOptions, 'onAttempt' | 'onRefusal'>) {}

  /** The allowed connections still open, with their bytes so far (`endedAt`: now): what `onAttempt` will report. */
  open(): EgressAttempt[] {
    const now = Date.now();
    return [...this.inFlight].map((t) => attemptOf(t, now));
  }

  /** Reports a refused attempt (a name that did not resolve is recorded as an attempt, not as a refusal). */
  refused(
    via: EgressRefusal['via'],
    host: string,
    port: number,
    target: string,
    refusal: UrlRefusal,
    startedAt = Date.now(),
  ): void {
    if (refusal.code !== 'DNS_FAILED') this.options.onRefusal?.({ via, host, port, target, refusal });
    this.options.onAttempt?.({
      seq: ++this.seq,
      via,
      host,
      port,
      allowed: false,
      reason: refusal.reason,
      bytesIn: 0,
      bytesOut: 0,
      startedAt,
      endedAt: Date.now(),
    });
  }

  /**
   * A request whose target could not be parsed: recorded (under its raw text, clipped) and refused as malformed.
   * Answers the refusal to send.
   */
  malformed(via: EgressRefusal['via'], raw: string, reason: string): UrlRefusal {
    const refusal: UrlRefusal = { code: 'URL_INVALID', reason: `bad proxy request: ${reason}` };
    this.refused(via, printable(raw).slice(0, 200), 0, printable(raw).slice(0, 200), refusal);
    return refusal;
  }

  /** Reports an allowed connection once it has ended, with what went through it. */
  account(via: EgressRefusal['via'], host: string, port: number, local?: LocalRoute): Tally {
    const tally: Tally = {
      seq: ++this.seq,
      via,
      host,
      port,
      local,
      bytesIn: 0,
      bytesOut: 0,
      startedAt: Date.now(),
      done: false,
    };
    this.inFlight.add(tally);
    tally.end = () => {
      if (tally.done) return;
      tally.done = true;
      this.inFlight.delete(tally);
      this.options.onAttempt?.(attemptOf(tally, Date.now()));
    };
    return tally;
  }
}
