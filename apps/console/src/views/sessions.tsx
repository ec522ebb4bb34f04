import { useMemo, useState } from 'preact/hooks';
import type { Session } from '../../../../packages/client/src/types';
import { client } from '../api';
import { age } from '../format';
import { href } from '../route';
import { STATUSES, StatusBadge } from './status';
import { Problem, useLoad } from './use-load';

type Activity = Session['activity'];

function sessionStatus(activity: Activity): 'running' | 'failing' | 'idle' {
  if ((activity.byStatus.running ?? 0) > 0) return 'running';
  const failed = STATUSES.filter((s) => s !== 'running' && s !== 'succeeded').some(
    (s) => (activity.byStatus[s] ?? 0) > 0,
  );
  return failed ? 'failing' : 'idle';
}

/** Every session of the caller: status, tenant, age, actions by status, tiers used; filter and search. */
export function SessionsView() {
  const [loaded, reload] = useLoad(() => client().sessions.list(), []);
  const [search, setSearch] = useState('');
  const [only, setOnly] = useState<'all' | 'running' | 'failing' | 'idle'>('all');
  const sessions = loaded.state === 'ok' ? loaded.value : [];
  const shown = useMemo(() => {
    const needle = search.trim().toLowerCase();
    return sessions
      .filter((s) => only === 'all' || sessionStatus(s.activity) === only)
      .filter(
        (s) =>
          !needle ||
          [s.id, s.tenant, s.template, JSON.stringify(s.metadata), s.activity.tiers.join(' ')]
            .join(' ')
            .toLowerCase()
            .includes(needle),
      )
      .sort((a, b) => b.createdAt.localeCompare(a.createdAt));
  }, [sessions, search, only]);

  return (
    <section aria-labelledby="sessions-title">
      <div class="bar">
        <h1 id="sessions-title">Sessions</h1>
        <input
          type="search"
          aria-label="Search sessions"
          placeholder="Search id, tenant, metadata, tier"
          value={search}
          onInput={(e) => setSearch(e.currentTarget.value)}
        />
        <select
          aria-label="Filter by status"
          value={only}
          onChange={(e) => setOnly(e.currentTarget.value as typeof only)}
        >
          <option value="all">All</option>
          <option value="running">Running</option>
          <option value="failing">With failures</option>
          <option value="idle">Idle</option>
        </select>
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      {loaded.state === 'loading' && <p class="muted">Loading…</p>}
      {loaded.state === 'error' && <Problem message={loaded.message} />}
      {loaded.state === 'ok' && shown.length === 0 && (
        <p class="muted">No sessions{search || only !== 'all' ? ' match' : ' yet'}.</p>
      )}
      {shown.length > 0 && (
        <div class="table-wrap">
          <table class="sessions cards">
            <thead>
              <tr>
                <th scope="col">Session</th>
                <th scope="col">Status</th>
                <th scope="col">Tenant</th>
                <th scope="col">Age</th>
                <th scope="col">Actions</th>
                <th scope="col">Tiers</th>
              </tr>
            </thead>
            <tbody>
              {shown.map((s) => (
                <tr key={s.id} data-session-id={s.id}>
                  <td data-label="Session">
                    <a href={href({ view: 'timeline', sessionId: s.id })}>{s.id}</a>
                    {s.forkedFrom && <span class="muted"> fork of {s.forkedFrom.sessionId}</span>}
                  </td>
                  <td data-label="Status">
                    <span class={`badge session-${sessionStatus(s.activity)}`}>
                      {sessionStatus(s.activity)}
                    </span>
                  </td>
                  <td data-label="Tenant">{s.tenant}</td>
                  <td data-label="Age" title={s.createdAt}>
                    {age(s.createdAt)}
                  </td>
                  <td data-label="Actions" class="counts">
                    <span class="count-list">
                      <span class="total">{s.activity.actions}</span>
                      {STATUSES.filter((st) => (s.activity.byStatus[st] ?? 0) > 0).map((st) => (
                        <span key={st} class="count">
                          <StatusBadge status={st} /> {s.activity.byStatus[st]}
                        </span>
                      ))}
                    </span>
                  </td>
                  <td data-label="Tiers">{s.activity.tiers.join(', ') || '—'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </section>
  );
}
