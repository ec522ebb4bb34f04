import { useEffect, useRef, useState } from 'preact/hooks';
import { client, describeError } from '../api';
import { time } from '../format';

/** One frame at most this often. */
export const FRAME_MS = 2000;

interface Frame {
  src: string;
  url: string;
  title: string;
  tab: string;
  at: string;
}

/** A picture the engine sent, as a `data:` URL: the page's policy allows no other image source. */
function dataUrl(blob: Blob): Promise<string> {
  return new Promise((resolve, reject) => {
    const reader = new FileReader();
    reader.onload = () => resolve(reader.result as string);
    reader.onerror = () => reject(reader.error ?? new Error('the frame could not be read'));
    reader.readAsDataURL(blob);
  });
}

/** Watching only while asked to, the pane is on screen and the tab is visible. */
function useVisible(target: { current: HTMLElement | null }): boolean {
  const [inView, setInView] = useState(false);
  const [tabVisible, setTabVisible] = useState(document.visibilityState === 'visible');
  useEffect(() => {
    const el = target.current;
    if (!el) return;
    const observer = new IntersectionObserver(([entry]) => setInView(entry.isIntersecting));
    observer.observe(el);
    const onVisibility = () => setTabVisible(document.visibilityState === 'visible');
    document.addEventListener('visibilitychange', onVisibility);
    return () => {
      observer.disconnect();
      document.removeEventListener('visibilitychange', onVisibility);
    };
  }, []);
  return inView && tabVisible;
}

/**
 * The session's browser tab, read-only: while watching, a frame every FRAME_MS of the tab its browser actions drive,
 * with the page's URL and title (`GET …/browser/view`: a look, not an action; nothing is recorded on the session).
 */
export function BrowserPane({ sessionId }: { sessionId: string }) {
  const pane = useRef<HTMLElement>(null);
  const visible = useVisible(pane);
  const [watching, setWatching] = useState(false);
  const [frame, setFrame] = useState<Frame>();
  const [problem, setProblem] = useState<string>();

  useEffect(() => {
    if (!watching || !visible) return;
    let live = true;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const abort = new AbortController();
    const shoot = async () => {
      const started = Date.now();
      try {
        const view = await client().browser.view(sessionId, { signal: abort.signal });
        const src = await dataUrl(view.image);
        if (!live) return;
        setFrame({ src, url: view.url, title: view.title, tab: view.tab, at: new Date().toISOString() });
        setProblem(undefined);
      } catch (error) {
        if (!live) return;
        setProblem(describeError(error));
        setWatching(false);
        return;
      }
      timer = setTimeout(() => void shoot(), Math.max(0, FRAME_MS - (Date.now() - started)));
    };
    void shoot();
    return () => {
      live = false;
      abort.abort();
      clearTimeout(timer);
    };
  }, [watching, visible, sessionId]);

  return (
    <section class="card stack live-pane" aria-labelledby="browser-title" ref={pane}>
      <div class="bar">
        <h2 id="browser-title">Browser</h2>
        <button type="button" aria-pressed={watching} onClick={() => setWatching(!watching)}>
          {watching ? 'Stop watching' : 'Watch'}
        </button>
      </div>
      <p class="muted small">
        The tab the session's browser actions drive, read-only: one frame every {FRAME_MS / 1000} s while this
        pane is in view. Looking is not an action: nothing is recorded and nothing runs in the page.
      </p>
      {problem && (
        <p class="error" role="alert">
          {problem}
        </p>
      )}
      {frame && (
        <figure class="browser-frame" data-testid="browser-frame">
          <figcaption class="small">
            <span class="mono url" data-testid="browser-url">
              {frame.url || '—'}
            </span>{' '}
            {frame.title && <span class="muted">“{frame.title}”</span>}{' '}
            <span class="muted">
              {frame.tab} · {time(frame.at)}
            </span>
          </figcaption>
          <img src={frame.src} alt={`The session's browser tab${frame.url ? ` at ${frame.url}` : ''}`} />
        </figure>
      )}
    </section>
  );
}
