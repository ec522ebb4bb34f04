/**
 * Runs each session's tasks one at a time, in the order they were queued; sessions do not wait for each other. A
 * task that fails does not stop the ones queued after it.
 */
export class SessionQueue {
  private readonly tails = new Map<string, Promise<unknown>>();

  run<T>(sessionId: string, task: () => Promise<T>): Promise<T> {
    const previous = this.tails.get(sessionId) ?? Promise.resolve();
    const result = previous.then(task, task);
    const tail = result.catch(() => undefined);
    this.tails.set(sessionId, tail);
    void tail.then(() => {
      if (this.tails.get(sessionId) === tail) this.tails.delete(sessionId);
    });
    return result;
  }

  /** Resolves once every task queued so far has ended. */
  async idle(): Promise<void> {
    await Promise.all([...this.tails.values()]);
  }
}
