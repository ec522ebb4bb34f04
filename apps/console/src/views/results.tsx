import { useMemo } from 'preact/hooks';
import { size } from '../format';
import { href } from '../route';
import { type ResultBody, type ShownResult, shownResults } from '../results';

function Body({ body }: { body: ResultBody }) {
  switch (body.kind) {
    case 'image':
      return (
        <img
          class="result-image"
          src={body.src}
          alt={`${body.mime} result`}
          data-mime={body.mime}
          {...(body.width && { width: body.width })}
          {...(body.height && { height: body.height })}
        />
      );
    case 'html':
      // sandbox="" (no allow-scripts, no allow-same-origin): the result's scripts never run and it gets an opaque
      // origin; the document's own policy (html-frame.ts) keeps it from loading anything.
      return (
        <iframe
          class="result-frame"
          sandbox=""
          srcdoc={body.srcdoc}
          title="HTML result"
          referrerpolicy="no-referrer"
          style={{ height: `${body.height}px` }}
        />
      );
    case 'text':
      return (
        <pre class="mono out" data-mime={body.mime}>
          {body.text}
          {body.omitted > 0 && (
            <span class="muted">
              {'\n'}… {body.omitted.toLocaleString()} more characters not shown
            </span>
          )}
        </pre>
      );
  }
}

function Result({ sessionId, result }: { sessionId: string; result: ShownResult }) {
  return (
    <li class="result" data-main={result.main} data-mime={result.body?.mime}>
      <div class="result-label">
        <strong>{result.main ? 'Out:' : 'Display'}</strong>{' '}
        {result.body && <span class="muted mono">{result.body.mime}</span>}
        {result.others.length > 0 && <span class="muted small"> (also {result.others.join(', ')})</span>}
      </div>
      {result.body && <Body body={result.body} />}
      {result.files.length > 0 && (
        <ul class="result-files">
          {result.files.map((f) => (
            <li key={`${f.mimeType}:${f.path}`}>
              <span class="muted">{f.mimeType}</span> in the workspace at{' '}
              <a class="mono" href={href({ view: 'file', sessionId, path: f.path })}>
                {f.path}
              </a>{' '}
              <span class="muted">({size(f.bytes)})</span>
            </li>
          ))}
        </ul>
      )}
    </li>
  );
}

/**
 * A code cell's rich results, in the order it made them: images inline, HTML in a sandboxed frame, the other types
 * as text, entries too big to inline as the workspace files they were written to (linked to their lineage).
 */
export function Results({ sessionId, output }: { sessionId: string; output: unknown }) {
  const shown = useMemo(() => shownResults(output), [output]);
  if (shown.results.length === 0) return null;
  return (
    <details open>
      <summary>Results</summary>
      <ol class="results" data-testid="results">
        {shown.results.map((r, i) => (
          <Result key={i} sessionId={sessionId} result={r} />
        ))}
      </ol>
      {shown.omitted > 0 && (
        <p class="muted small">… {shown.omitted.toLocaleString()} more results not shown</p>
      )}
    </details>
  );
}
