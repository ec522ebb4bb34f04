import { Terminal } from '@xterm/headless';
import { WebSocket } from 'ws';

/** How a terminal's WebSocket was refused before it opened: the HTTP answer of the upgrade. */
export class UpgradeRefused extends Error {
  constructor(
    readonly status: number,
    readonly body: string,
  ) {
    super(`upgrade refused: ${status} ${body}`);
  }
}

/**
 * A real terminal client: xterm.js (headless: the same VT parser and screen buffer as in a browser, without the
 * canvas) fed by the terminal's WebSocket, as the console's pane is. Tests read its screen as a person would see it.
 */
export class TerminalClient {
  readonly term: Terminal;
  /** The socket's close: code and reason (the terminal's end, when it ended). */
  readonly closed: Promise<{ code: number; reason: string }>;
  /** Bytes of output received. */
  received = 0;
  private readonly waiters = new Set<() => void>();

  private constructor(
    readonly ws: WebSocket,
    cols: number,
    rows: number,
  ) {
    this.term = new Terminal({ cols, rows, allowProposedApi: true, scrollback: 1000 });
    ws.on('message', (data: Buffer, isBinary) => {
      if (!isBinary) return;
      this.received += data.length;
      this.term.write(data, () => this.check());
    });
    this.closed = new Promise((resolve) =>
      ws.on('close', (code, reason) => {
        resolve({ code, reason: reason.toString('utf8') });
        this.check();
      }),
    );
  }

  /** Opens the terminal's WebSocket at `url` (ws://…); rejects with `UpgradeRefused` when the engine refuses it. */
  static connect(
    url: string,
    options: { headers?: Record<string, string>; cols?: number; rows?: number } = {},
  ): Promise<TerminalClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(url, { headers: options.headers ?? {} });
      const client = new TerminalClient(ws, options.cols ?? 80, options.rows ?? 24);
      ws.once('open', () => resolve(client));
      ws.once('unexpected-response', (_req, res) => {
        let body = '';
        res.on('data', (c: Buffer) => (body += c.toString()));
        res.on('end', () => reject(new UpgradeRefused(res.statusCode ?? 0, body)));
      });
      ws.once('error', reject);
    });
  }

  /** Types text as keystrokes (a binary frame, as xterm.js's onData sends them). */
  type(text: string): void {
    this.ws.send(Buffer.from(text, 'utf8'), { binary: true });
  }

  /** Resizes the screen and tells the terminal, as a browser pane does when its box changes size. */
  resize(cols: number, rows: number): void {
    this.term.resize(cols, rows);
    this.ws.send(JSON.stringify({ type: 'resize', cols, rows }));
  }

  /** The screen (the active buffer's visible rows), each line right-trimmed. */
  screen(): string {
    const buffer = this.term.buffer.active;
    const lines: string[] = [];
    for (let y = 0; y < this.term.rows; y++) {
      lines.push(buffer.getLine(buffer.viewportY + y)?.translateToString(true) ?? '');
    }
    return lines.join('\n');
  }

  /** The line the cursor is on (a prompt, once the shell waits for input): spaces written stay, empty cells do not. */
  cursorLine(): string {
    const buffer = this.term.buffer.active;
    return buffer.getLine(buffer.baseY + buffer.cursorY)?.translateToString(true) ?? '';
  }

  /** Everything in the buffer, scrollback included. */
  text(): string {
    const buffer = this.term.buffer.active;
    const lines: string[] = [];
    for (let y = 0; y < buffer.length; y++) lines.push(buffer.getLine(y)?.translateToString(true) ?? '');
    return lines.join('\n');
  }

  /** Resolves once `ready()` holds (checked after each output is drawn); rejects after `timeoutMs` with the screen. */
  until(ready: () => boolean, what: string, timeoutMs = 15_000): Promise<void> {
    if (ready()) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const check = () => {
        if (!ready()) return;
        this.waiters.delete(check);
        clearTimeout(timer);
        resolve();
      };
      const timer = setTimeout(() => {
        this.waiters.delete(check);
        reject(new Error(`timed out waiting for ${what}; the screen:\n${this.screen()}`));
      }, timeoutMs);
      this.waiters.add(check);
    });
  }

  /** Resolves once a line of the buffer matches `re`. */
  untilLine(re: RegExp, timeoutMs?: number): Promise<void> {
    return this.until(
      () =>
        this.text()
          .split('\n')
          .some((l) => re.test(l)),
      `a line matching ${re}`,
      timeoutMs,
    );
  }

  close(): Promise<{ code: number; reason: string }> {
    this.ws.close();
    return this.closed;
  }

  private check(): void {
    for (const w of [...this.waiters]) w();
  }
}
