/** A driver call that did not come back within its deadline. */
export class DeadlineError extends Error {}

/** The action's signal fired (session ended, engine shutting down). */
export class AbortedError extends Error {}

/** `p`, unless `signal` fires first (then `AbortedError`). The listener never outlives the call. */
export async function abortable<T>(p: Promise<T>, signal?: AbortSignal): Promise<T> {
  if (!signal) return p;
  if (signal.aborted) throw new AbortedError(reasonOf(signal));
  let onAbort!: () => void;
  const stop = new Promise<never>((_, reject) => {
    onAbort = () => reject(new AbortedError(reasonOf(signal)));
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

function reasonOf(signal: AbortSignal): string {
  const r: unknown = signal.reason;
  return r instanceof Error ? r.message : typeof r === 'string' ? r : 'aborted';
}
