import type { ActionStatus } from '../../../../packages/client/src/types';

export const STATUSES: ActionStatus[] = [
  'running',
  'awaiting_approval',
  'succeeded',
  'failed',
  'timed_out',
  'denied',
  'error',
  'cancelled',
  'interrupted',
];

/** A status as a coloured, labelled badge (the colour is never the only signal). */
export function StatusBadge({ status }: { status: string }) {
  return <span class={`badge status-${status}`}>{status.replaceAll('_', ' ')}</span>;
}

export function RiskBadge({ risk }: { risk?: { score: number; level: string; reasons: string[] } | null }) {
  if (!risk) return <span class="muted">—</span>;
  const reasons = risk.reasons.length > 0 ? risk.reasons.join('\n') : 'no risk signals';
  return (
    <span
      class={`badge risk-${risk.level}`}
      title={reasons}
      aria-label={`risk ${risk.level} ${risk.score}: ${reasons}`}
    >
      {risk.level} {risk.score}
    </span>
  );
}
