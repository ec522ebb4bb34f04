import { useMemo } from 'preact/hooks';
import type { Action } from '../../../../packages/client/src/types';
import { client } from '../api';
import { duration, time } from '../format';
import { inputView, valueView } from '../input-view';
import { href } from '../route';
import { Artifacts, artifactsOf } from './artifacts';
import { Results } from './results';
import { RiskBadge, StatusBadge } from './status';
import { Problem, useLoad } from './use-load';
import { Value } from './value';

const ENDED_BADLY = new Set(['failed', 'timed_out', 'denied', 'error', 'interrupted', 'cancelled']);

/**
 * One action opened: its input, output (live while it runs), a code cell's rich results, error, risk reasons and
 * the files it touched.
 */
export function ActionDetails({
  sessionId,
  summary,
  live,
  onClose,
}: {
  sessionId: string;
  summary: Action;
  live?: { stdout: string; stderr: string };
  onClose: () => void;
}) {
  // The timeline's copy lacks the input and files: fetch the whole action (again when its status changes).
  const [loaded] = useLoad(
    () => client().actions.get(sessionId, summary.id),
    [sessionId, summary.id, summary.status],
  );
  const action: Action = loaded.state === 'ok' ? loaded.value : summary;
  const running = action.status === 'running';
  const stdout = running ? (live?.stdout ?? '') : (action.stdout ?? '');
  const stderr = running ? (live?.stderr ?? '') : (action.stderr ?? '');
  const input = 'input' in action ? action.input : undefined;
  const shownInput = useMemo(() => inputView(input), [input]);
  // A code cell's output is its rich results (below); other types' outputs are read like inputs, their artifacts
  // listed apart.
  const shownOutput = useMemo(
    () => (action.type === 'code' ? undefined : valueView(action.output, ['artifacts'])),
    [action.type, action.output],
  );
  return (
    <aside class="details card" aria-label={`Action ${action.id}`} data-testid="action-details">
      <div class="bar">
        <h2 class="mono">{action.id}</h2>
        <button type="button" onClick={onClose} aria-label="Close the action's details">
          ✕
        </button>
      </div>
      <dl class="facts">
        <dt>Status</dt>
        <dd>
          <StatusBadge status={action.status} />
          {action.exitCode !== undefined && action.exitCode !== null && <span> exit {action.exitCode}</span>}
        </dd>
        <dt>Type</dt>
        <dd>{action.type}</dd>
        <dt>Tier</dt>
        <dd>{action.tier}</dd>
        <dt>Risk</dt>
        <dd>
          <RiskBadge risk={action.risk} />
          {action.risk && action.risk.reasons.length > 0 && (
            <ul class="reasons">
              {action.risk.reasons.map((r) => (
                <li key={r}>{r}</li>
              ))}
            </ul>
          )}
        </dd>
        <dt>Started</dt>
        <dd>{time(action.startedAt)}</dd>
        <dt>Duration</dt>
        <dd>{running ? 'running' : duration(action.durationMs)}</dd>
        {action.retryOf && (
          <>
            <dt>Retry of</dt>
            <dd>
              <a class="mono" href={href({ view: 'timeline', sessionId, actionId: action.retryOf })}>
                {action.retryOf}
              </a>
            </dd>
          </>
        )}
      </dl>
      {loaded.state === 'error' && <Problem message={loaded.message} />}
      {ENDED_BADLY.has(action.status) && (
        <p>
          <a href={href({ view: 'failure', sessionId, actionId: action.id })}>Failure context →</a>
        </p>
      )}
      {action.error && (
        <div class="error-box" role="note">
          <strong>{action.error.code}</strong> ({action.error.class}): {action.error.message}
        </div>
      )}
      {input !== undefined && (
        <details open>
          <summary>Input</summary>
          <Value view={shownInput} testId="input" />
        </details>
      )}
      {/* Empty streams stay folded: what the action made (its results, its output) comes into view sooner. */}
      <details open={running || stdout.length > 0}>
        <summary>stdout{running && <span class="live"> live</span>}</summary>
        <pre class="mono out" data-testid="stdout">
          {stdout || <span class="muted">(empty)</span>}
        </pre>
      </details>
      <details open={stderr.length > 0}>
        <summary>stderr</summary>
        <pre class="mono out" data-testid="stderr">
          {stderr || <span class="muted">(empty)</span>}
        </pre>
      </details>
      {action.type === 'code' && !running && <Results sessionId={sessionId} output={action.output} />}
      {shownOutput &&
        !running &&
        (shownOutput.facts.length > 0 || shownOutput.blocks.length > 0 || shownOutput.images.length > 0) && (
          <details open>
            <summary>Output</summary>
            <Value view={shownOutput} testId="output" />
          </details>
        )}
      {!running && <Artifacts sessionId={sessionId} artifacts={artifactsOf(action.output)} />}
      {'files' in action && Array.isArray(action.files) && action.files.length > 0 && (
        <details open>
          <summary>Files touched</summary>
          <ul>
            {action.files.map((f: { path: string; access: string }) => (
              <li key={`${f.path}:${f.access}`}>
                <a href={href({ view: 'file', sessionId, path: f.path })} class="mono">
                  {f.path}
                </a>{' '}
                <span class="muted">{f.access}</span>
              </li>
            ))}
          </ul>
        </details>
      )}
    </aside>
  );
}
