import { useEffect, useRef, useState } from 'preact/hooks';
import { describeError } from '../api';
import {
  closeTerminal,
  listTerminals,
  openTerminal,
  type TerminalInfo,
  terminalSocketUrl,
  terminalToken,
} from '../live-api';
import type { createTerminal, TerminalScreen } from '../terminal/xterm-entry';
import { href } from '../route';
import { Problem } from './use-load';

/**
 * xterm.js, built apart (scripts/build-console.mjs) and loaded the first time a terminal is shown. A variable, so
 * the bundler leaves this import to the browser.
 */
const TERMINAL_MODULE = '/console/terminal.js';
let terminalModule: Promise<{ createTerminal: typeof createTerminal }> | undefined;
const loadTerminal = () =>
  (terminalModule ??= import(TERMINAL_MODULE) as Promise<{
    createTerminal: typeof createTerminal;
  }>);

/** How often the list is read while an opening waits for approval. */
const WAIT_POLL_MS = 2000;
/** The size a terminal opens at before its pane has measured itself. */
const DEFAULT_SIZE = { cols: 100, rows: 28 };

type Link =
  | { state: 'connecting' }
  | { state: 'open' }
  /** `ended`: the terminal itself ended; otherwise only this connection did, and attaching again resumes it. */
  | { state: 'closed'; reason: string; ended: boolean };

/**
 * One terminal attached in xterm.js: its output (the scrollback first) drawn as it comes, keystrokes sent as they
 * are typed, its size following the pane's. Leaving the pane detaches; the terminal lives on in the session until
 * it is closed or idle.
 */
function XTerm({
  sessionId,
  terminal,
  onClosed,
  onReattach,
}: {
  sessionId: string;
  terminal: TerminalInfo;
  onClosed: (reason: string) => void;
  onReattach: () => void;
}) {
  const box = useRef<HTMLDivElement>(null);
  const [link, setLink] = useState<Link>({ state: 'connecting' });

  useEffect(() => {
    const container = box.current;
    if (!container) return;
    let screen: TerminalScreen | undefined;
    let socket: WebSocket | undefined;
    let observer: ResizeObserver | undefined;
    let disposed = false;
    const send = (data: Uint8Array | string) => {
      if (socket?.readyState === WebSocket.OPEN) socket.send(data);
    };
    const resize = (size: { cols: number; rows: number }) =>
      send(JSON.stringify({ type: 'resize', ...size }));

    void (async () => {
      try {
        const [{ createTerminal }, token] = await Promise.all([
          loadTerminal(),
          terminal.token ?? terminalToken(sessionId, terminal.id),
        ]);
        if (disposed) return;
        // Input goes as binary frames: a text frame is how a resize is told, so typed text never looks like one.
        const shown = createTerminal(container, terminal, { onInput: send, onResize: resize });
        screen = shown;
        observer = new ResizeObserver(() => shown.fit());
        observer.observe(container);
        socket = new WebSocket(terminalSocketUrl(sessionId, terminal, token));
        socket.binaryType = 'arraybuffer';
        socket.onopen = () => {
          setLink({ state: 'open' });
          shown.fit();
          resize({ cols: shown.cols, rows: shown.rows });
          shown.focus();
        };
        socket.onmessage = (e: MessageEvent<ArrayBuffer | string>) =>
          shown.write(typeof e.data === 'string' ? e.data : new Uint8Array(e.data));
        socket.onclose = (e) => {
          if (disposed) return;
          const reason =
            e.code === 1000
              ? `the terminal ended${e.reason ? ` (${e.reason})` : ''}`
              : `disconnected (${e.code}${e.reason ? `: ${e.reason}` : ''})`;
          setLink({ state: 'closed', reason, ended: e.code === 1000 });
          if (e.code === 1000) onClosed(reason);
        };
      } catch (error) {
        if (!disposed) setLink({ state: 'closed', reason: describeError(error), ended: false });
      }
    })();
    return () => {
      disposed = true;
      observer?.disconnect();
      socket?.close(1000, 'detached');
      screen?.dispose();
    };
  }, [sessionId, terminal.id]);

  return (
    <div class="term-wrap">
      <p class="muted small" role="status" data-testid="terminal-link" data-state={link.state}>
        <span class="mono">{terminal.id}</span>{' '}
        {link.state === 'connecting' ? 'connecting…' : link.state === 'open' ? 'attached' : link.reason}
        {link.state === 'closed' && !link.ended && (
          <>
            {' '}
            <button type="button" class="link" onClick={onReattach}>
              Attach again
            </button>
          </>
        )}
      </p>
      <div class="xterm-box" ref={box} data-testid="terminal" data-terminal-id={terminal.id} />
    </div>
  );
}

/** The session's terminals: open one, attach to one that runs, close it. */
export function TerminalPane({ sessionId }: { sessionId: string }) {
  const [terminals, setTerminals] = useState<TerminalInfo[]>();
  const [attached, setAttached] = useState<TerminalInfo>();
  const [problem, setProblem] = useState<string>();
  const [busy, setBusy] = useState(false);
  /** Connections made again to the attached terminal after one dropped. */
  const [attempt, setAttempt] = useState(0);
  /** The terminal asked for while a policy asks a person first: it opens once approved. */
  const [waiting, setWaiting] = useState<string>();

  const refresh = () =>
    listTerminals(sessionId).then(
      (list) => setTerminals(list),
      (error: unknown) => setProblem(describeError(error)),
    );
  useEffect(() => void refresh(), [sessionId]);

  const open = async () => {
    setBusy(true);
    setProblem(undefined);
    try {
      const opened = await openTerminal(sessionId, DEFAULT_SIZE);
      if (opened.status === 'awaiting_approval') setWaiting(opened.id);
      else setAttached(opened);
      await refresh();
    } catch (error) {
      setProblem(describeError(error));
    } finally {
      setBusy(false);
    }
  };
  // A policy asked a person: the terminal opens once approved, and is attached when the list shows it open.
  useEffect(() => {
    if (!waiting) return;
    const timer = setInterval(() => {
      listTerminals(sessionId).then(
        (list) => {
          setTerminals(list);
          const opened = list.find((t) => t.id === waiting && t.status === 'open');
          if (opened) {
            setWaiting(undefined);
            setAttached(opened);
          }
        },
        () => undefined,
      );
    }, WAIT_POLL_MS);
    return () => clearInterval(timer);
  }, [waiting, sessionId]);
  const close = async (t: TerminalInfo) => {
    setBusy(true);
    try {
      await closeTerminal(sessionId, t.id);
      if (attached?.id === t.id) setAttached(undefined);
      await refresh();
    } catch (error) {
      setProblem(describeError(error));
    } finally {
      setBusy(false);
    }
  };

  const others = (terminals ?? []).filter((t) => t.id !== attached?.id && t.status === 'open');
  return (
    <section class="card stack live-pane" aria-labelledby="terminal-title">
      <div class="bar">
        <h2 id="terminal-title">Terminal</h2>
        <button type="button" onClick={() => void open()} disabled={busy}>
          New terminal
        </button>
        {attached && (
          <button type="button" class="danger" onClick={() => void close(attached)} disabled={busy}>
            Close it
          </button>
        )}
      </div>
      {problem && <Problem message={problem} />}
      {waiting && (
        <p role="status">
          A policy asks a person before this session opens a terminal: decide on the{' '}
          <a href={href({ view: 'approvals' })}>Approvals</a> page; it is attached here once approved.
        </p>
      )}
      {others.length > 0 && (
        <ul class="inline-list" aria-label="Other terminals of the session">
          {others.map((t) => (
            <li key={t.id}>
              <button type="button" class="link mono" onClick={() => setAttached(t)}>
                {t.id}
              </button>{' '}
              <span class="muted small">
                {t.status}, {t.cols}×{t.rows}
              </span>
            </li>
          ))}
        </ul>
      )}
      {attached ? (
        <XTerm
          key={`${attached.id}:${attempt}`}
          sessionId={sessionId}
          // A new connection needs a new token: the one it was opened with may have expired.
          terminal={attempt > 0 ? { ...attached, token: undefined } : attached}
          onClosed={() => void refresh()}
          onReattach={() => setAttempt((n) => n + 1)}
        />
      ) : (
        <p class="muted">
          A shell (bash) in the session's sandbox, with its environment: what it runs is recorded on the
          session and obeys its policies.
        </p>
      )}
    </section>
  );
}
