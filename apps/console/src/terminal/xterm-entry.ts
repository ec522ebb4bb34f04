/**
 * The terminal pane's drawing (xterm.js and its fit addon), built as its own module (`/console/terminal.js`) and
 * loaded only when a terminal is opened: it is most of the console's weight, and most visits never need it.
 * Plain DOM, no Preact: the pane (views/terminal-pane.tsx) owns the component and the WebSocket.
 */
import { FitAddon } from '@xterm/addon-fit';
import { Terminal } from '@xterm/xterm';

export interface TerminalScreen {
  /** Draws output (the scrollback first on attach). */
  write(data: Uint8Array | string): void;
  /** Makes the screen as big as its box allows, in whole cells (calls `onResize` when that changes). */
  fit(): void;
  focus(): void;
  readonly cols: number;
  readonly rows: number;
  dispose(): void;
}

export interface TerminalEvents {
  /** What the person typed or pasted, as the terminal encodes it. */
  onInput(data: Uint8Array): void;
  onResize(size: { cols: number; rows: number }): void;
}

export function createTerminal(
  container: HTMLElement,
  size: { cols: number; rows: number },
  events: TerminalEvents,
): TerminalScreen {
  const term = new Terminal({
    cols: size.cols,
    rows: size.rows,
    cursorBlink: true,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, monospace',
    fontSize: 13,
    scrollback: 5000,
  });
  const fitter = new FitAddon();
  term.loadAddon(fitter);
  term.open(container);
  // For tests and devtools: the terminal's screen buffer, behind its box.
  Object.defineProperty(container, 'term', { value: term, configurable: true });
  const encoder = new TextEncoder();
  term.onData((data) => events.onInput(encoder.encode(data)));
  term.onBinary((data) => events.onInput(Uint8Array.from(data, (c) => c.charCodeAt(0))));
  term.onResize(({ cols, rows }) => events.onResize({ cols, rows }));
  return {
    write: (data) => term.write(data),
    fit: () => {
      if (container.clientWidth > 0 && container.clientHeight > 0) fitter.fit();
    },
    focus: () => term.focus(),
    get cols() {
      return term.cols;
    },
    get rows() {
      return term.rows;
    },
    dispose: () => term.dispose(),
  };
}
