import { client } from '../api';
import { duration } from '../format';
import { href } from '../route';
import { StatusBadge } from './status';
import { Problem, useLoad } from './use-load';

/** How an action of the retry chain stands to the one shown. */
const RELATION: Record<string, string> = {
  self: 'this action',
  ancestor: 'what it retries',
  descendant: 'a retry of it',
};

/** Why an action failed: the actions before it, the files it touched and their last writers, its retry chain. */
export function FailureView({ sessionId, actionId }: { sessionId: string; actionId: string }) {
  const [loaded] = useLoad(
    () => client().actions.context(sessionId, actionId, { before: 10 }),
    [sessionId, actionId],
  );
  if (loaded.state === 'loading') return <p class="muted">Loading…</p>;
  if (loaded.state === 'error') return <Problem message={loaded.message} />;
  const ctx = loaded.value;
  const a = ctx.action;
  return (
    <section aria-labelledby="failure-title" class="stack">
      <h1 id="failure-title">
        Failure context <span class="mono muted">{a.id}</span>
      </h1>
      <div class="card">
        <p>
          <StatusBadge status={a.status} /> {a.type} <span class="mono">{a.inputSummary}</span> on {a.tier}
          {a.exitCode !== undefined && a.exitCode !== null && <> · exit {a.exitCode}</>}
        </p>
        {a.error && (
          <p class="error-box">
            <strong>{a.error.code}</strong>: {a.error.message}
          </p>
        )}
        {a.outputExcerpt && <pre class="mono out">{a.outputExcerpt}</pre>}
        {ctx.planStep && (
          <p>
            Step <span class="mono">{String((ctx.planStep as { stepId?: string }).stepId ?? '')}</span> of
            plan{' '}
            <a
              href={href({
                view: 'plans',
                sessionId,
                planId: String((ctx.planStep as { planId?: string }).planId),
              })}
            >
              {String((ctx.planStep as { planId?: string }).planId)}
            </a>
          </p>
        )}
      </div>
      <h2>Retry chain</h2>
      <ol class="chain" data-testid="retry-chain">
        {ctx.retryChain.map((r) => (
          <li key={r.id}>
            <a class="mono" href={href({ view: 'timeline', sessionId, actionId: r.id })}>
              {r.id}
            </a>{' '}
            <StatusBadge status={r.status} /> <span class="muted">{RELATION[r.relation] ?? r.relation}</span>{' '}
            <span class="mono">{r.inputSummary}</span>
          </li>
        ))}
      </ol>
      <h2>Files it touched</h2>
      {ctx.files.length === 0 ? (
        <p class="muted">None.</p>
      ) : (
        <ul>
          {ctx.files.map((f) => (
            <li key={f.path}>
              <a class="mono" href={href({ view: 'file', sessionId, path: f.path })}>
                {f.path}
              </a>{' '}
              <span class="muted">{f.access.join(', ')}</span>
              {f.lastWrittenBy && (
                <>
                  {' '}
                  · last written by{' '}
                  <a class="mono" href={href({ view: 'timeline', sessionId, actionId: f.lastWrittenBy.id })}>
                    {f.lastWrittenBy.id}
                  </a>
                </>
              )}
            </li>
          ))}
        </ul>
      )}
      <h2>Before it</h2>
      {ctx.before.length === 0 ? (
        <p class="muted">It was the session's first action.</p>
      ) : (
        <ol class="chain">
          {ctx.before.map((b) => (
            <li key={b.id}>
              #{b.seq}{' '}
              <a class="mono" href={href({ view: 'timeline', sessionId, actionId: b.id })}>
                {b.id}
              </a>{' '}
              <StatusBadge status={b.status} /> {b.type} <span class="mono">{b.inputSummary}</span>{' '}
              <span class="muted">{duration(b.durationMs)}</span>
            </li>
          ))}
        </ol>
      )}
    </section>
  );
}
