import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import type { Action } from '../../../../packages/client/src/types';
import { client, describeError } from '../api';
import { duration, time } from '../format';
import { href } from '../route';
import { rowPreview } from '../row-preview';
import { ActionDetails } from './action-details';
import { RiskBadge, StatusBadge } from './status';
import { Problem } from './use-load';

const ROW = 40; // px: rows have one height, so only those in view are drawn (10 000 actions stay quick)
const OVERSCAN = 10;
const PAGE = 1000;

interface Live {
  stdout: string;
  stderr: string;
}

/**
 * Loads a session's whole timeline page by page (the first page is shown at once), then follows its events:
 * a started action appears, its output streams in, its result replaces it when it ends.
 */
function useTimeline(sessionId: string) {
  const [actions, setActions] = useState<Action[]>([]);
  const [complete, setComplete] = useState(false);
  const [problem, setProblem] = useState<string>();
  const [live, setLive] = useState<Record<string, Live>>({});

  useEffect(() => {
    const api = client();
    const abort = new AbortController();
    const byId = new Map<string, number>();
    const list: Action[] = [];
    let loaded = false;
    // Events the stream replays or sends while the pages load, for actions no page has shown yet.
    const pending = new Set<string>();
    const publish = () => setActions(list.slice());
    const upsert = (action: Action) => {
      const at = byId.get(action.id);
      if (at !== undefined) {
        list[at] = action;
        return;
      }
      const last = list[list.length - 1];
      byId.set(action.id, list.length);
      list.push(action);
      if (last && (action.seq ?? 0) < (last.seq ?? 0)) {
        list.sort((x, y) => (x.seq ?? 0) - (y.seq ?? 0));
        list.forEach((a, i) => byId.set(a.id, i));
      }
    };
    const refresh = (actionId: string) =>
      api.actions.get(sessionId, actionId).then(
        (a) => {
          if (abort.signal.aborted) return;
          upsert(a);
          publish();
        },
        () => undefined,
      );
    /** An action started or ended: fetch it unless what is shown is already its final state. */
    const changed = (actionId: string, ended: boolean) => {
      const at = byId.get(actionId);
      if (at !== undefined && (!ended || list[at].status !== 'running')) return;
      if (at === undefined && !loaded) pending.add(actionId);
      else void refresh(actionId);
    };

    void (async () => {
      try {
        let cursor: string | undefined;
        do {
          const page = await api.actions.list(sessionId, { limit: PAGE, ...(cursor && { cursor }) });
          if (abort.signal.aborted) return;
          for (const a of page.actions) upsert(a);
          publish();
          cursor = page.nextCursor;
        } while (cursor);
        loaded = true;
        setComplete(true);
        for (const id of pending) if (!byId.has(id)) void refresh(id);
        pending.clear();
      } catch (error) {
        if (!abort.signal.aborted) setProblem(describeError(error));
      }
    })();

    void (async () => {
      try {
        for await (const event of api.events(sessionId, { signal: abort.signal })) {
          const actionId = typeof event.data.actionId === 'string' ? event.data.actionId : undefined;
          if (!actionId) continue;
          if (event.type === 'action.started') changed(actionId, false);
          else if (event.type === 'action.completed') changed(actionId, true);
          else if (event.type === 'action.output') {
            const stream = event.data.stream === 'stderr' ? 'stderr' : 'stdout';
            const chunk = typeof event.data.chunk === 'string' ? event.data.chunk : '';
            setLive((prev) => {
              const was = prev[actionId] ?? { stdout: '', stderr: '' };
              return { ...prev, [actionId]: { ...was, [stream]: was[stream] + chunk } };
            });
          }
        }
      } catch {
        // the stream ended or the session went away: what is shown stays
      }
    })();
    return () => abort.abort();
  }, [sessionId]);

  return { actions, complete, problem, live };
}

/** A session's actions in order: status, type, tier, risk, duration; one opens to its details. */
export function TimelineView({ sessionId, openActionId }: { sessionId: string; openActionId?: string }) {
  const { actions, complete, problem, live } = useTimeline(sessionId);
  const [selected, setSelected] = useState<string | undefined>(openActionId);
  const [scrollTop, setScrollTop] = useState(0);
  const [height, setHeight] = useState(600);
  const box = useRef<HTMLDivElement>(null);

  useEffect(() => setSelected(openActionId), [openActionId]);
  useEffect(() => {
    const el = box.current;
    if (!el) return;
    const observer = new ResizeObserver(() => setHeight(el.clientHeight));
    observer.observe(el);
    return () => observer.disconnect();
  }, []);

  const first = Math.max(0, Math.floor(scrollTop / ROW) - OVERSCAN);
  const last = Math.min(actions.length, Math.ceil((scrollTop + height) / ROW) + OVERSCAN);
  const index = useMemo(() => actions.findIndex((a) => a.id === selected), [actions, selected]);
  const current = index >= 0 ? actions[index] : undefined;

  // Keys can come faster than renders: each moves from where the last one left the selection.
  const at = useRef(index);
  at.current = index;
  const focusRow = (i: number) => {
    const el = box.current;
    if (!el || i < 0 || i >= actions.length) return;
    at.current = i;
    setSelected(actions[i].id);
    if (i * ROW < el.scrollTop) el.scrollTop = i * ROW;
    else if ((i + 1) * ROW > el.scrollTop + el.clientHeight) el.scrollTop = (i + 1) * ROW - el.clientHeight;
    requestAnimationFrame(() => el.querySelector<HTMLElement>(`[data-index="${i}"]`)?.focus());
  };
  const onKey = (e: KeyboardEvent) => {
    const keys: Record<string, number> = { ArrowDown: 1, ArrowUp: -1, PageDown: 10, PageUp: -10 };
    if (e.key in keys) {
      e.preventDefault();
      focusRow(Math.max(0, Math.min(actions.length - 1, at.current + keys[e.key])));
    } else if (e.key === 'Home') {
      e.preventDefault();
      focusRow(0);
    } else if (e.key === 'End') {
      e.preventDefault();
      focusRow(actions.length - 1);
    }
  };

  return (
    <section class="timeline-view" aria-labelledby="timeline-title">
      <div class="bar">
        <h1 id="timeline-title">
          Timeline <span class="muted mono">{sessionId}</span>
        </h1>
        <span class="muted" data-testid="timeline-count">
          {actions.length} action{actions.length === 1 ? '' : 's'}
          {!complete && !problem && ' (loading…)'}
        </span>
      </div>
      {problem && <Problem message={problem} />}
      <div class="split">
        <div
          class="rows"
          ref={box}
          role="listbox"
          aria-label="Actions, oldest first"
          aria-activedescendant={current ? `row-${current.id}` : undefined}
          tabIndex={0}
          onScroll={(e) => setScrollTop(e.currentTarget.scrollTop)}
          onKeyDown={onKey}
        >
          <div style={{ height: `${actions.length * ROW}px`, position: 'relative' }}>
            {actions.slice(first, last).map((a, k) => {
              const i = first + k;
              return (
                <div
                  key={a.id}
                  id={`row-${a.id}`}
                  class={`row${a.id === selected ? ' selected' : ''}`}
                  role="option"
                  aria-selected={a.id === selected}
                  data-index={i}
                  data-action-id={a.id}
                  data-status={a.status}
                  tabIndex={-1}
                  style={{ top: `${i * ROW}px` }}
                  onClick={() => setSelected(a.id === selected ? undefined : a.id)}
                >
                  <span class="seq">#{a.seq}</span>
                  <StatusBadge status={a.status} />
                  <span class="type">
                    {a.type}
                    {a.retryOf && <span class="muted"> retry</span>}
                  </span>
                  <span class="summary mono">
                    <RowThumb action={a} />
                    <span class="text">{a.inputSummary ?? ''}</span>
                  </span>
                  <span class="tier">{a.tier}</span>
                  <RiskBadge risk={a.risk} />
                  <span class="dur">
                    {a.status === 'running' ? time(a.startedAt) : duration(a.durationMs)}
                  </span>
                </div>
              );
            })}
          </div>
        </div>
        {current && (
          <ActionDetails
            sessionId={sessionId}
            summary={current}
            live={live[current.id]}
            onClose={() => setSelected(undefined)}
          />
        )}
      </div>
      {actions.length === 0 && complete && (
        <p class="muted">No actions yet. New ones appear here as they run.</p>
      )}
      <p class="muted small">
        <a href={href({ view: 'graph', sessionId })}>Graph of this session</a> ·{' '}
        <a href={href({ view: 'plans', sessionId })}>Plans</a>
      </p>
    </section>
  );
}

/** The first picture an action made, as a thumbnail in its row, or a chip naming what it holds. */
function RowThumb({ action }: { action: Action }) {
  const preview = rowPreview(action);
  if (!preview) return null;
  if (preview.kind === 'chip') return <span class="chip">{preview.label}</span>;
  return <img class="thumb" src={preview.src} alt={`${preview.mime} result`} data-mime={preview.mime} />;
}
