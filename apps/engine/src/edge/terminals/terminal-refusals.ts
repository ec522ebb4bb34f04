import { type ActionResult, type ErrorKind, SwitchyardError } from '@switchyard/common';

/** A terminal action that did not succeed, answered with the status its refusal means. */
export class TerminalRefusedError extends SwitchyardError {
  constructor(
    readonly code: string,
    readonly kind: ErrorKind,
    message: string,
    details: Record<string, unknown>,
  ) {
    super(message, details);
  }
}

/**
 * The HTTP answer of a terminal action that was refused or failed (it is recorded as such; `details.actionId` names
 * it): 429 for the session's terminal limit (close one, retry), 503 when the sandbox tier is unavailable or full, 403
 * for a policy's or a hook's refusal, 409 when it was cancelled, 503 when the sandbox was lost under it, 500 when
 * opening failed in the sandbox otherwise.
 */
export function refusalOf(result: ActionResult): TerminalRefusedError {
  const error = result.error;
  const code = error?.code ?? (result.status === 'denied' ? 'POLICY_DENIED' : 'TERMINAL_FAILED');
  const message = error?.message ?? `the terminal action ended ${result.status}`;
  const details = { actionId: result.id };
  if (result.status === 'denied') {
    if (code === 'TERMINAL_LIMIT')
      return new TerminalRefusedError(code, 'rate_limited', message, { ...details, retryAfterSeconds: 1 });
    if (error?.class === 'limit' || code === 'TIER_UNAVAILABLE' || code === 'TEMPLATE_NOT_READY')
      return new TerminalRefusedError(code, 'unavailable', message, { ...details, retryAfterSeconds: 5 });
    return new TerminalRefusedError(code, 'forbidden', message, details);
  }
  if (result.status === 'cancelled') return new TerminalRefusedError(code, 'conflict', message, details);
  // The session's sandbox died under the open: the next one gets a fresh sandbox.
  if (code === 'RUNNER_LOST' || code === 'RUNNER_UNRESPONSIVE')
    return new TerminalRefusedError(code, 'unavailable', message, { ...details, retryAfterSeconds: 1 });
  return new TerminalRefusedError(code, 'internal', message, details);
}
