import { useEffect, useState } from 'preact/hooks';
import type { PendingApproval } from '../../../../packages/client/src/types';
import { client, describeError } from '../api';
import { href } from '../route';
import { RiskBadge } from './status';
import { Problem, useLoad } from './use-load';

/** How often the list is read again while it is open: approvals come and go without the page's doing. */
const REFRESH_MS = 2000;

/**
 * Actions a policy rule holds for a person's decision: what they would run, why the rule asks, until when; approve
 * or reject each (with a reason). The list is the caller's: an admin key sees every tenant's.
 */
export function ApprovalsView() {
  const [list, reload] = useLoad(() => client().approvals.list(), []);
  const [message, setMessage] = useState<{ text: string; error: boolean }>();
  useEffect(() => {
    const timer = setInterval(reload, REFRESH_MS);
    return () => clearInterval(timer);
  }, []);

  const decide = async (a: PendingApproval, decision: 'approve' | 'reject', reason: string) => {
    try {
      const done = await client().approvals[decision](a.sessionId, a.actionId, reason || undefined);
      setMessage({ text: `${a.tool} (${a.actionId}) ${done.decision} by ${done.decidedBy}`, error: false });
    } catch (error) {
      setMessage({ text: describeError(error), error: true });
    }
    reload();
  };

  return (
    <section aria-labelledby="approvals-title" class="stack">
      <div class="bar">
        <h1 id="approvals-title">Approvals</h1>
        <button type="button" onClick={reload}>
          Refresh
        </button>
      </div>
      {message && (
        <p class={message.error ? 'error' : 'muted'} role={message.error ? 'alert' : 'status'}>
          {message.text}
        </p>
      )}
      {list.state === 'error' && <Problem message={list.message} />}
      {list.state === 'ok' && list.value.length === 0 && (
        <p class="muted">No action is waiting for approval.</p>
      )}
      {list.state === 'ok' && list.value.length > 0 && (
        <ul class="approvals">
          {list.value.map((a) => (
            <PendingItem key={a.actionId} approval={a} onDecide={decide} />
          ))}
        </ul>
      )}
    </section>
  );
}

function PendingItem({
  approval: a,
  onDecide,
}: {
  approval: PendingApproval;
  onDecide: (a: PendingApproval, decision: 'approve' | 'reject', reason: string) => Promise<void>;
}) {
  const [reason, setReason] = useState('');
  const [busy, setBusy] = useState(false);
  const go = (decision: 'approve' | 'reject') => () => {
    setBusy(true);
    void onDecide(a, decision, reason).finally(() => setBusy(false));
  };
  const reasonId = `reason-${a.actionId}`;
  return (
    <li class="card stack" data-action-id={a.actionId}>
      <div class="bar">
        <strong>{a.tool}</strong>
        <RiskBadge risk={a.risk} />
        <span class="badge">{a.tier}</span>
        <a href={href({ view: 'timeline', sessionId: a.sessionId, actionId: a.actionId })}>{a.actionId}</a>
      </div>
      <code class="summary">{a.summary}</code>
      <ul class="reasons">
        {a.reasons.map((r) => (
          <li key={r}>{r}</li>
        ))}
      </ul>
      <p class="muted">
        {a.layer} policy · session {a.sessionId} · expires {new Date(a.expiresAt).toLocaleString()}
      </p>
      <label for={reasonId}>Reason (recorded with the decision)</label>
      <input id={reasonId} value={reason} onInput={(e) => setReason((e.target as HTMLInputElement).value)} />
      <div class="bar">
        <button type="button" disabled={busy} onClick={go('approve')}>
          Approve
        </button>
        <button type="button" class="danger" disabled={busy} onClick={go('reject')}>
          Reject
        </button>
      </div>
    </li>
  );
}
