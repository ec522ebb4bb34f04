import type { Block, ValueView } from '../input-view';

/** Text with its line breaks, labelled with its language; what was too long to draw is counted. */
export function CodeBlock({ block }: { block: Block }) {
  return (
    <figure class="code-block">
      <figcaption class="muted small">
        <span class="mono">{block.key}</span> <span class="lang">{block.language}</span>
      </figcaption>
      <pre class="mono code" data-language={block.language} data-key={block.key}>
        <code class={`language-${block.language}`}>{block.text}</code>
        {block.omitted > 0 && (
          <span class="muted">
            {'\n'}… {block.omitted.toLocaleString()} more characters not shown
          </span>
        )}
      </pre>
    </figure>
  );
}

/** An object read as facts (short values), blocks (code, contents, long text) and pictures. */
export function Value({ view, testId }: { view: ValueView; testId?: string }) {
  return (
    <div class="value" data-testid={testId}>
      {view.facts.length > 0 && (
        <dl class="facts">
          {view.facts.map((f) => [
            <dt key={`k:${f.key}`} class="mono">
              {f.key}
            </dt>,
            <dd key={`v:${f.key}`} class="mono">
              {f.value}
            </dd>,
          ])}
        </dl>
      )}
      {view.blocks.map((b) => (
        <CodeBlock key={b.key} block={b} />
      ))}
      {view.images.map((i) => (
        <figure key={i.key} class="code-block">
          <figcaption class="muted small">
            <span class="mono">{i.key}</span> {i.mime}
          </figcaption>
          <img class="result-image" src={i.src} alt={`${i.key} (${i.mime})`} data-mime={i.mime} />
        </figure>
      ))}
    </div>
  );
}
