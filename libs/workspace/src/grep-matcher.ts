import { Worker } from 'node:worker_threads';

/**
 * The worker's whole program. It gets a pattern (source and flags, compiled there: a RegExp does not cross threads)
 * and a file's text, and answers the indices of the lines that match, at most `max`.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
parentPort.on('message', ({ source, flags, text, max }) => {
  const re = new RegExp(source, flags);
  const hits = [];
  let start = 0;
  for (let i = 0; start <= text.length && hits.length < max; i++) {
    let end = text.indexOf('\\n', start);
    if (end === -1) end = text.length;
    if (re.test(text.slice(start, end))) hits.push(i);
    start = end + 1;
  }
  parentPort.postMessage(hits);
});
`;

/** Idle workers kept for the next grep; more are started while greps run side by side, and end after. */
const MAX_IDLE = 2;

/**
 * Runs a user's regular expression over a file's lines in a worker thread, never on the event loop: a pattern that
 * backtracks catastrophically (`(a+)+$` on a long line) costs its grep the time limit and a worker (terminated),
 * while the engine goes on answering every other request. The patterns keep JavaScript's syntax and meaning.
 */
export class GrepMatcher {
  private readonly idle: Worker[] = [];
  private closed = false;

  /** Indices of matching lines (at most `max`), or `timeout` when the match took longer than `timeoutMs`. */
  async match(re: RegExp, text: string, max: number, timeoutMs: number): Promise<number[] | 'timeout'> {
    const worker = this.idle.pop() ?? new Worker(WORKER_SOURCE, { eval: true });
    worker.ref();
    return new Promise<number[] | 'timeout'>((resolve, reject) => {
      const done = (settle: () => void, keep: boolean) => {
        clearTimeout(timer);
        worker.off('message', onMessage);
        worker.off('error', onError);
        worker.off('exit', onExit);
        if (keep && !this.closed && this.idle.length < MAX_IDLE) {
          worker.unref();
          this.idle.push(worker);
        } else void worker.terminate();
        settle();
      };
      const onMessage = (hits: number[]) => done(() => resolve(hits), true);
      const onError = (err: Error) => done(() => reject(err), false);
      const onExit = () => done(() => reject(new Error('the grep worker exited')), false);
      const timer = setTimeout(() => done(() => resolve('timeout'), false), timeoutMs);
      worker.on('message', onMessage);
      worker.once('error', onError);
      worker.once('exit', onExit);
      worker.postMessage({ source: re.source, flags: re.flags, text, max });
    });
  }

  /** Ends the idle workers; a match still running ends with its own. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.all(this.idle.splice(0).map((w) => w.terminate()));
  }
}
