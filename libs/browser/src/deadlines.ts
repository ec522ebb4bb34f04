/** A driver call that did not come back within its deadline. */
export class DeadlineError extends Error {}

/**
 * The action's signal fired (session ended, engine shutting down, or a request the action depended on was
 * refused). `cause` is the signal's reason.
 */
export class AbortedError extends Error {}

/** `p`, unless `signal` fires first (then `AbortedError`). The listener never outlives the call. */
export async function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) {
    p.catch(() => undefined); // given up on: its rejection is no one's
    throw abortedBy(signal);
  }
  let onAbort!: () => void;
  const stop = new Promise<never>((_, reject) => {
    onAbort = () => reject(abortedBy(signal));
    signal.addEventListener('abort', onAbort, { once: true });
  });
  try {
    return await Promise.race([p, stop]);
  } finally {
    signal.removeEventListener('abort', onAbort);
  }
}

/**
 * `p` within `ms` (`DeadlineError` after), and abortable. A browser call can hang for good (a wedged
 * renderer, a dead pipe), so nothing the router awaits from the driver is awaited without one. The timer
 * never outlives the call.
 */
export async function bounded<T>(p: Promise<T>, ms: number, signal?: AbortSignal): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new DeadlineError(`no answer from the browser within ${ms} ms`)), ms);
  });
  p.catch(() => undefined); // a late rejection after the deadline is not unhandled
  try {
    return await abortable(Promise.race([p, deadline]), signal);
  } finally {
    clearTimeout(timer);
  }
}

function abortedBy(signal: AbortSignal): AbortedError {
  const r: unknown = signal.reason;
  const message = r instanceof Error ? r.message : typeof r === 'string' ? r : 'aborted';
  return new AbortedError(message, { cause: r });
}
