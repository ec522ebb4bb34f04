import { BrowserPane } from './browser-pane';
import { PortsPane } from './ports-pane';
import { TerminalPane } from './terminal-pane';

/** A session as it runs now: a shell in its sandbox, the servers listening there, its browser tab. */
export function LiveView({ sessionId }: { sessionId: string }) {
  return (
    <section aria-labelledby="live-title" class="stack">
      <h1 id="live-title">
        Live <span class="mono muted">{sessionId}</span>
      </h1>
      <TerminalPane sessionId={sessionId} />
      <div class="live-grid">
        <PortsPane sessionId={sessionId} />
        <BrowserPane sessionId={sessionId} />
      </div>
    </section>
  );
}
