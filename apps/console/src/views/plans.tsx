import type { ElementDefinition } from 'cytoscape';
import { useMemo, useState } from 'preact/hooks';
import type { Plan } from '../../../../packages/client/src/types';
import { client } from '../api';
import { time } from '../format';
import { href } from '../route';
import { Dag } from './dag';
import { StatusBadge } from './status';
import { Problem, useLoad } from './use-load';

const STEP_TONE: Record<string, string> = { failed: 'failed', running: 'running' };

function dagOf(plan: Plan): ElementDefinition[] {
  return [
    ...plan.steps.map((s) => ({
      data: { id: s.id, label: `${s.id} (${s.status})`, kind: 'Step', tone: STEP_TONE[s.status] },
    })),
    ...plan.steps.flatMap((s) =>
      s.dependsOn.map((d) => ({ data: { id: `${d}->${s.id}`, source: d, target: s.id, label: '' } })),
    ),
  ];
}

/** The session's plans; one opened shows its DAG with step statuses, attempts and replans. */
export function PlansView({ sessionId, planId }: { sessionId: string; planId?: string }) {
  const [plans] = useLoad(() => client().plans.list(sessionId), [sessionId]);
  const list = plans.state === 'ok' ? plans.value : [];
  const plan = list.find((p) => p.id === planId) ?? (planId ? undefined : list[list.length - 1]);
  const [selectedStep, setSelectedStep] = useState<string>();
  const dag = useMemo(() => (plan ? dagOf(plan) : []), [plan]);
  return (
    <section aria-labelledby="plans-title" class="stack">
      <h1 id="plans-title">
        Plans <span class="mono muted">{sessionId}</span>
      </h1>
      {plans.state === 'loading' && <p class="muted">Loading…</p>}
      {plans.state === 'error' && <Problem message={plans.message} />}
      {plans.state === 'ok' && list.length === 0 && <p class="muted">This session has no plans.</p>}
      {list.length > 0 && (
        <ul class="plan-list">
          {list.map((p) => (
            <li key={p.id}>
              <a
                href={href({ view: 'plans', sessionId, planId: p.id })}
                aria-current={p.id === plan?.id ? 'true' : undefined}
              >
                <span class="mono">{p.id}</span>
              </a>{' '}
              <span class={`badge plan-${p.status}`}>{p.status}</span> {p.goal ?? ''}{' '}
              <span class="muted">{time(p.createdAt)}</span>
            </li>
          ))}
        </ul>
      )}
      {planId && plans.state === 'ok' && !plan && <Problem message={`No plan ${planId} in this session.`} />}
      {plan && (
        <>
          <h2>
            {plan.goal ?? plan.id} <span class={`badge plan-${plan.status}`}>{plan.status}</span>
          </h2>
          <Dag
            elements={dag}
            layout="breadthfirst"
            onSelect={setSelectedStep}
            label={`Steps of plan ${plan.id} and their dependencies`}
          />
          <div class="table-wrap">
            <table class="cards" data-testid="plan-steps">
              <thead>
                <tr>
                  <th scope="col">Step</th>
                  <th scope="col">Status</th>
                  <th scope="col">Depends on</th>
                  <th scope="col">Attempts</th>
                  <th scope="col">Version</th>
                </tr>
              </thead>
              <tbody>
                {plan.steps.map((s) => (
                  <tr
                    key={s.id}
                    data-step-id={s.id}
                    data-status={s.status}
                    class={s.id === selectedStep ? 'selected' : ''}
                  >
                    <td data-label="Step" class="mono">
                      {s.id}
                    </td>
                    <td data-label="Status">
                      <span class={`badge status-${s.status}`}>{s.status}</span>
                      {s.reason && <span class="muted"> {s.reason}</span>}
                    </td>
                    <td data-label="Depends on" class="mono">
                      {s.dependsOn.join(', ') || '—'}
                    </td>
                    <td data-label="Attempts">
                      {s.attempts.length === 0 && <span class="muted">none</span>}
                      {s.attempts.map((a, i) => (
                        <span key={a.actionId} class="attempt">
                          {i + 1}.{' '}
                          <a class="mono" href={href({ view: 'timeline', sessionId, actionId: a.actionId })}>
                            {a.actionId}
                          </a>{' '}
                          <StatusBadge status={a.status} />
                        </span>
                      ))}
                    </td>
                    <td data-label="Version">
                      v{s.version}
                      {s.replaced && s.replaced.length > 0 && (
                        <span class="muted"> (replanned {s.replaced.length}×)</span>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        </>
      )}
    </section>
  );
}
