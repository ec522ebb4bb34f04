import { useState } from 'preact/hooks';
import { describeError } from '../api';
import { size } from '../format';
import { href } from '../route';
import { MAX_IMAGE_BYTES, workspaceImage } from '../workspace-image';

export interface Artifact {
  path: string;
  bytes: number;
  mimeType: string;
}

const DRAWN = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);

const isArtifact = (v: unknown): v is Artifact => {
  const a = v as Partial<Artifact> | null;
  return (
    typeof a === 'object' &&
    a !== null &&
    typeof a.path === 'string' &&
    typeof a.bytes === 'number' &&
    typeof a.mimeType === 'string'
  );
};

/** A browser action's `output.artifacts`, of whatever shape it came. */
export function artifactsOf(output: unknown): Artifact[] {
  const list = (output as { artifacts?: unknown } | null)?.artifacts;
  return Array.isArray(list) ? list.filter(isArtifact) : [];
}

type Shown =
  | { state: 'idle' }
  | { state: 'loading' }
  | { state: 'ok'; src: string }
  | { state: 'error'; message: string };

/**
 * A screenshot the action wrote to the workspace, drawn when asked: reading it is a file download recorded on the
 * session, so merely opening an action does not add to its timeline.
 */
function ArtifactImage({ sessionId, artifact }: { sessionId: string; artifact: Artifact }) {
  const [shown, setShown] = useState<Shown>({ state: 'idle' });
  const load = () => {
    setShown({ state: 'loading' });
    workspaceImage(sessionId, artifact.path, artifact.mimeType).then(
      (src) => setShown({ state: 'ok', src }),
      (error: unknown) => setShown({ state: 'error', message: describeError(error) }),
    );
  };
  if (shown.state === 'ok') {
    return (
      <img
        class="result-image"
        src={shown.src}
        alt={`${artifact.path} (${artifact.mimeType})`}
        data-mime={artifact.mimeType}
      />
    );
  }
  return (
    <p>
      <button type="button" onClick={load} disabled={shown.state === 'loading'}>
        {shown.state === 'loading' ? 'Loading…' : 'Show the picture'}
      </button>{' '}
      <span class="muted small">(read with the file API: recorded on the session as a download)</span>
      {shown.state === 'error' && <span class="error"> {shown.message}</span>}
    </p>
  );
}

/** Files an action wrote as its product (screenshots, PDFs, downloads): linked to their lineage, pictures drawn. */
export function Artifacts({ sessionId, artifacts }: { sessionId: string; artifacts: Artifact[] }) {
  if (artifacts.length === 0) return null;
  return (
    <details open>
      <summary>Artifacts</summary>
      <ul class="artifacts">
        {artifacts.map((a) => (
          <li key={a.path} data-mime={a.mimeType}>
            <a class="mono" href={href({ view: 'file', sessionId, path: a.path })}>
              {a.path}
            </a>{' '}
            <span class="muted">
              {a.mimeType}, {size(a.bytes)}
            </span>
            {DRAWN.has(a.mimeType) && a.bytes <= MAX_IMAGE_BYTES && (
              <ArtifactImage sessionId={sessionId} artifact={a} />
            )}
          </li>
        ))}
      </ul>
    </details>
  );
}
