import { Fragment } from 'preact';
import type { Health } from '../../../../packages/client/src/types';
import { client } from '../api';
import { Problem, useLoad } from './use-load';

interface Readiness {
  status?: string;
  details?: Record<string, { status?: string; [k: string]: unknown }>;
}

/** Which tiers this engine can use and why not, the pools, the graph store and its backlog, readiness. */
export function HealthView() {
  const [health, reload] = useLoad(() => client().request<Health>('GET', '/health'), []);
  const [ready] = useLoad(
    () =>
      fetch('/health/ready').then(async (r) => {
        const body = (await r.json()) as Readiness & {
          error?: { details?: { indicators?: Readiness['details'] } };
        };
        return { ok: r.ok, indicators: body.details ?? body.error?.details?.indicators ?? {} };
      }),
    [],
  );
  return (
    <section aria-labelledby="health-title" class="stack">
      <div class="bar">
        <h1 id="health-title">Health</h1>
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      {health.state === 'error' && <Problem message={health.message} />}
      {health.state === 'ok' && (
        <>
          <p>
            Auth: <strong>{health.value.auth ?? '—'}</strong>
          </p>
          <h2>Tiers</h2>
          <div class="table-wrap">
            <table class="cards">
              <thead>
                <tr>
                  <th scope="col">Tier</th>
                  <th scope="col">Available</th>
                  <th scope="col">Why not / state</th>
                </tr>
              </thead>
              <tbody>
                {Object.entries(health.value.tiers ?? {}).map(([tier, t]) => (
                  <tr key={tier} data-tier={tier}>
                    <td data-label="Tier">{tier}</td>
                    <td data-label="Available">
                      <span class={`badge ${t.available ? 'status-succeeded' : 'status-failed'}`}>
                        {t.available ? 'yes' : 'no'}
                      </span>
                    </td>
                    <td data-label="Why not / state">
                      {'reason' in t && t.reason && <p>{t.reason}</p>}
                      <Facts
                        value={Object.fromEntries(
                          Object.entries(t).filter(([k]) => k !== 'available' && k !== 'reason'),
                        )}
                      />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
          <h2>Context graph</h2>
          <Facts value={health.value.graph ?? {}} />
        </>
      )}
      <h2>Readiness</h2>
      {ready.state === 'error' && <Problem message={ready.message} />}
      {ready.state === 'ok' && (
        <>
          <p>
            <span class={`badge ${ready.value.ok ? 'status-succeeded' : 'status-failed'}`}>
              {ready.value.ok ? 'ready' : 'not ready'}
            </span>
          </p>
          <Facts value={ready.value.indicators} />
        </>
      )}
    </section>
  );
}

/** A nested object as a definition list (the pools' and stores' own fields, whatever they are). */
function Facts({ value }: { value: Record<string, unknown> }) {
  const entries = Object.entries(value);
  if (entries.length === 0) return null;
  return (
    <dl class="facts">
      {entries.map(([k, v]) => (
        <Fragment key={k}>
          <dt>{k}</dt>
          <dd>
            {v !== null && typeof v === 'object' ? <Facts value={v as Record<string, unknown>} /> : String(v)}
          </dd>
        </Fragment>
      ))}
    </dl>
  );
}
