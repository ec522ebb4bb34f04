import { type ActionTier, type RiskAssessment, SwitchyardError } from '@switchyard/common';
import type { Outcome } from './action-handler.port';

/**
 * The outcome of an action whose run threw instead of answering: the record is kept either way.
 * - Something the action needs is not there now (`unavailable`: a cluster that cannot give the session a pod, its
 *   API server unreachable, a store down): recorded `denied` as a tier unavailable before the run would be
 *   (`TIER_UNAVAILABLE`), with the error's own message, which names the cause and the setting to fix.
 * - Too much work for a bound (`rate_limited`): `denied` with class `limit` and the error's code.
 * - Any other error of ours: `error`, class `internal`, its code and message. Anything else may carry host details:
 *   a fixed message only (the log has the stack).
 */
export function faultOutcome(err: unknown, tier: ActionTier, risk: RiskAssessment): Outcome {
  if (err instanceof SwitchyardError && err.kind === 'unavailable') {
    const error = { class: 'policy' as const, code: 'TIER_UNAVAILABLE', message: err.message };
    return { status: 'denied', tier, risk, error, files: [] };
  }
  if (err instanceof SwitchyardError && err.kind === 'rate_limited') {
    return {
      status: 'denied',
      tier,
      risk,
      error: { class: 'limit', code: err.code, message: err.message },
      files: [],
    };
  }
  const error =
    err instanceof SwitchyardError
      ? { class: 'internal' as const, code: err.code, message: err.message }
      : { class: 'internal' as const, message: 'internal error while running the action' };
  return { status: 'error', tier, risk, error, files: [] };
}

/** True when `faultOutcome` made of `err` is the engine's own fault, worth an error in the log. */
export function isEngineFault(err: unknown): boolean {
  return !(err instanceof SwitchyardError && (err.kind === 'unavailable' || err.kind === 'rate_limited'));
}
