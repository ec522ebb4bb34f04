export interface SseEvent {
  id?: number;
  event: string;
  data: any;
  /** `Date.now()` when the frame arrived. */
  receivedAt: number;
}

/** A minimal Server-Sent Events reader over fetch, for tests. */
export class SseClient {
  readonly events: SseEvent[] = [];
  private readonly abort = new AbortController();
  private waiters: Array<() => void> = [];
  private ended = false;

  private constructor() {}

  static async open(url: string, headers: Record<string, string> = {}): Promise<SseClient> {
    const client = new SseClient();
    const res = await fetch(url, { headers, signal: client.abort.signal });
    if (res.status !== 200 || !res.body)
      throw new Error(`SSE ${url}: HTTP ${res.status} ${await res.text()}`);
    void client.pump(res.body);
    return client;
  }

  /** Resolves with the first event (already received or future) matching `predicate`. */
  async waitFor(predicate: (e: SseEvent) => boolean, timeoutMs = 15_000): Promise<SseEvent> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const found = this.events.find(predicate);
      if (found) return found;
      if (this.ended) throw new Error('SSE stream ended before the event came');
      const left = deadline - Date.now();
      if (left <= 0) throw new Error(`no matching SSE event within ${timeoutMs} ms`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.waiters.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  get isEnded(): boolean {
    return this.ended;
  }

  close(): void {
    this.abort.abort();
  }

  private async pump(body: ReadableStream<Uint8Array>): Promise<void> {
    const decoder = new TextDecoder();
    let buffer = '';
    try {
      for await (const chunk of body) {
        buffer += decoder.decode(chunk, { stream: true });
        let end: number;
        while ((end = buffer.indexOf('\n\n')) >= 0) {
          this.parse(buffer.slice(0, end));
          buffer = buffer.slice(end + 2);
        }
      }
    } catch {
      /* aborted by close() */
    } finally {
      this.ended = true;
      this.wake();
    }
  }

  private parse(frame: string): void {
    let id: number | undefined;
    let event = 'message';
    const data: string[] = [];
    for (const line of frame.split('\n')) {
      if (line.startsWith('id: ')) id = Number(line.slice(4));
      else if (line.startsWith('event: ')) event = line.slice(7);
      else if (line.startsWith('data: ')) data.push(line.slice(6));
    }
    if (data.length === 0) return; // comments, retry hints
    this.events.push({ id, event, data: JSON.parse(data.join('\n')), receivedAt: Date.now() });
    this.wake();
  }

  private wake(): void {
    const waiters = this.waiters;
    this.waiters = [];
    for (const w of waiters) w();
  }
}
