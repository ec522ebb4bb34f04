/**
 * The Switchyard console: sessions, their timelines, graphs, failures, files and plans, a running session's
 * terminal, ports and browser, and the engine's health, read from the public API only. One page; the view is in the URL's hash.
 */
import { render } from 'preact';
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { Health } from '../../../packages/client/src/types';
import { client, describeError, storedKey, storeKey } from './api';
import { href, parseRoute, type Route } from './route';
import { ApprovalsView } from './views/approvals';
import { FailureView } from './views/failure';
import { FileView } from './views/file';
import { GraphPanel } from './views/graph';
import { HealthView } from './views/health';
import { KeyPrompt } from './views/key-prompt';
import { LiveView } from './views/live';
import { PlansView } from './views/plans';
import { SessionsView } from './views/sessions';
import { TimelineView } from './views/timeline';

function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const onHash = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', onHash);
    return () => removeEventListener('hashchange', onHash);
  }, []);
  return route;
}

type Gate = { state: 'checking' } | { state: 'open' } | { state: 'key'; message?: string };

function App() {
  const route = useRoute();
  const [gate, setGate] = useState<Gate>({ state: 'checking' });
  const [generation, setGeneration] = useState(0);

  // `/health` answers its details (`auth`) only to a valid key, or to anyone when keys are off: the key is
  // checked without a refused request (which the browser would report as an error).
  const check = useCallback(async (key: string | undefined, asked: boolean) => {
    try {
      const health = await client(key).request<Health>('GET', '/health');
      if (health.auth) {
        storeKey(health.auth === 'api-keys' ? key : undefined);
        setGate({ state: 'open' });
        setGeneration((g) => g + 1);
        return;
      }
      storeKey(undefined);
      setGate({
        state: 'key',
        message: asked || key ? 'The engine refused this API key: check it and try again.' : undefined,
      });
    } catch (error) {
      setGate({ state: 'key', message: `Cannot reach the engine: ${describeError(error)}` });
    }
  }, []);
  useEffect(() => void check(storedKey(), false), [check]);

  const sessionId = 'sessionId' in route ? route.sessionId : undefined;
  return (
    <div class="shell">
      <header class="top">
        <a class="brand" href={href({ view: 'sessions' })}>
          Switchyard
        </a>
        <nav aria-label="Main">
          <a href={href({ view: 'sessions' })} aria-current={route.view === 'sessions' ? 'page' : undefined}>
            Sessions
          </a>
          {sessionId && (
            <>
              <a
                href={href({ view: 'timeline', sessionId })}
                aria-current={route.view === 'timeline' ? 'page' : undefined}
              >
                Timeline
              </a>
              <a
                href={href({ view: 'graph', sessionId })}
                aria-current={route.view === 'graph' ? 'page' : undefined}
              >
                Graph
              </a>
              <a
                href={href({ view: 'live', sessionId })}
                aria-current={route.view === 'live' ? 'page' : undefined}
              >
                Live
              </a>
              <a
                href={href({ view: 'plans', sessionId })}
                aria-current={route.view === 'plans' ? 'page' : undefined}
              >
                Plans
              </a>
            </>
          )}
          <a
            href={href({ view: 'approvals' })}
            aria-current={route.view === 'approvals' ? 'page' : undefined}
          >
            Approvals
          </a>
          <a href={href({ view: 'health' })} aria-current={route.view === 'health' ? 'page' : undefined}>
            Health
          </a>
          {storedKey() && (
            <button
              type="button"
              class="link"
              onClick={() => (storeKey(undefined), setGate({ state: 'key' }))}
            >
              Forget key
            </button>
          )}
        </nav>
      </header>
      <main id="main">
        {gate.state === 'checking' && <p class="muted">Connecting…</p>}
        {gate.state === 'key' && (
          <KeyPrompt message={gate.message} onSubmit={(key) => void check(key, true)} />
        )}
        {gate.state === 'open' && <View route={route} key={`${generation}`} />}
      </main>
    </div>
  );
}

function View({ route }: { route: Route }) {
  switch (route.view) {
    case 'sessions':
      return <SessionsView />;
    case 'health':
      return <HealthView />;
    case 'approvals':
      return <ApprovalsView />;
    case 'timeline':
      return <TimelineView sessionId={route.sessionId} openActionId={route.actionId} />;
    case 'graph':
      return <GraphPanel sessionId={route.sessionId} />;
    case 'live':
      return <LiveView sessionId={route.sessionId} />;
    case 'failure':
      return <FailureView sessionId={route.sessionId} actionId={route.actionId} />;
    case 'file':
      return <FileView sessionId={route.sessionId} path={route.path} />;
    case 'plans':
      return <PlansView sessionId={route.sessionId} planId={route.planId} />;
  }
}

render(<App />, document.getElementById('app')!);
