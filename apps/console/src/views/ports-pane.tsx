import { useEffect, useState } from 'preact/hooks';
import { SwitchyardError } from '../../../../packages/client/src/errors';
import { describeError } from '../api';
import { listPorts, type PortInfo, type Preview, previewHref, previewPort } from '../live-api';
import { Problem } from './use-load';

/** How often the list is read again while it is shown: servers start and stop without the page's doing. */
const REFRESH_MS = 3000;
/** How long a preview link lasts; one is fetched again a minute before it ends. */
const PREVIEW_TTL_S = 3600;
const RENEW_BEFORE_MS = 60_000;

type Link = { state: 'loading' } | { state: 'ok'; preview: Preview } | { state: 'error'; message: string };

/**
 * The session's listening ports (servers its processes started), each with a link that opens it through the
 * engine's proxy in a new tab. The link carries a short-lived preview token, not the API key; the page it opens runs
 * the session's code, so it never shares this tab (`noopener`), where the key is kept.
 */
export function PortsPane({ sessionId }: { sessionId: string }) {
  const [ports, setPorts] = useState<PortInfo[]>();
  const [problem, setProblem] = useState<string>();
  const [links, setLinks] = useState<Record<number, Link>>({});
  const [attempt, setAttempt] = useState(0);

  useEffect(() => {
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const read = async () => {
      try {
        const list = await listPorts(sessionId);
        if (!live) return;
        setPorts(list);
        setProblem(undefined);
      } catch (error) {
        if (!live) return;
        setProblem(describeError(error));
        // A refusal (the session is gone, ports are off) stays one until something changes: asked again by hand.
        if (error instanceof SwitchyardError && error.status >= 400 && error.status < 500) return;
      }
      if (live) timer = setTimeout(() => void read(), REFRESH_MS);
    };
    void read();
    return () => {
      live = false;
      clearTimeout(timer);
    };
  }, [sessionId, attempt]);

  // A link for every port listed, made once and again before it expires.
  useEffect(() => {
    for (const p of ports ?? []) {
      const link = links[p.port];
      const stale = link?.state === 'ok' && Date.parse(link.preview.expiresAt) - Date.now() < RENEW_BEFORE_MS;
      if (link && !stale) continue;
      setLinks((was) => ({ ...was, [p.port]: { state: 'loading' } }));
      previewPort(sessionId, p.port, PREVIEW_TTL_S).then(
        (preview) => setLinks((was) => ({ ...was, [p.port]: { state: 'ok', preview } })),
        (error: unknown) =>
          setLinks((was) => ({ ...was, [p.port]: { state: 'error', message: describeError(error) } })),
      );
    }
  }, [ports, sessionId]);

  return (
    <section class="card stack live-pane" aria-labelledby="ports-title">
      <div class="bar">
        <h2 id="ports-title">Ports</h2>
        {problem && (
          <button type="button" onClick={() => setAttempt((n) => n + 1)}>
            Try again
          </button>
        )}
      </div>
      {problem && <Problem message={problem} />}
      {ports && ports.length === 0 && (
        <p class="muted">Nothing listens in the session yet: a server a process starts shows up here.</p>
      )}
      {ports && ports.length > 0 && (
        <ul class="ports" data-testid="ports">
          {ports.map((p) => {
            const link = links[p.port];
            return (
              <li key={p.port} data-port={p.port}>
                <strong class="mono">{p.port}</strong> <span class="muted mono small">{p.address}</span>
                {p.process && (
                  <span class="small">
                    {' '}
                    · <span class="mono">{p.process.name ?? p.process.id}</span>
                  </span>
                )}
                {p.tier && <span class="badge">{p.tier}</span>}{' '}
                {link?.state === 'ok' ? (
                  <a
                    href={previewHref(link.preview)}
                    target="_blank"
                    rel="noopener noreferrer"
                    data-testid="port-link"
                  >
                    Open ↗
                  </a>
                ) : link?.state === 'error' ? (
                  <span class="error small">{link.message}</span>
                ) : (
                  <span class="muted small">link…</span>
                )}
              </li>
            );
          })}
        </ul>
      )}
    </section>
  );
}
