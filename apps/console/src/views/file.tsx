import { useState } from 'preact/hooks';
import { client } from '../api';
import { time } from '../format';
import { href } from '../route';
import { StatusBadge } from './status';
import { Problem, useLoad } from './use-load';

/** A workspace file's lineage: which actions wrote and read it, in order. */
export function FileView({ sessionId, path }: { sessionId: string; path: string }) {
  const [draft, setDraft] = useState(path);
  const [loaded] = useLoad(
    () => (path ? client().files.lineage(sessionId, path) : Promise.resolve(undefined)),
    [sessionId, path],
  );
  return (
    <section aria-labelledby="file-title" class="stack">
      <h1 id="file-title">File lineage</h1>
      <form
        class="bar"
        onSubmit={(e) => {
          e.preventDefault();
          location.hash = href({ view: 'file', sessionId, path: draft.trim() });
        }}
      >
        <label for="file-path">Path</label>
        <input id="file-path" class="mono" value={draft} onInput={(e) => setDraft(e.currentTarget.value)} />
        <button type="submit">Show</button>
      </form>
      {loaded.state === 'error' && <Problem message={loaded.message} />}
      {loaded.state === 'ok' &&
        loaded.value &&
        (loaded.value.entries.length === 0 ? (
          <p class="muted">No action of this session read or wrote {loaded.value.path}.</p>
        ) : (
          <ol class="chain" data-testid="lineage">
            {loaded.value.entries.map((e) => (
              <li key={`${e.sessionId}:${e.id}`}>
                <span class={`badge access-${e.access.includes('write') ? 'write' : 'read'}`}>
                  {e.access.join('+')}
                </span>{' '}
                <a class="mono" href={href({ view: 'timeline', sessionId: e.sessionId, actionId: e.id })}>
                  {e.id}
                </a>{' '}
                <StatusBadge status={e.status} /> {e.type} <span class="mono">{e.inputSummary}</span>{' '}
                <span class="muted">{time(e.startedAt)}</span>
                {e.sessionId !== sessionId && <span class="muted"> (in {e.sessionId}, before the fork)</span>}
              </li>
            ))}
          </ol>
        ))}
    </section>
  );
}
