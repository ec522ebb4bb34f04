import { useState } from 'preact/hooks';

/** Asks once for an API key; it is kept for this tab only. */
export function KeyPrompt({ message, onSubmit }: { message?: string; onSubmit: (key: string) => void }) {
  const [key, setKey] = useState('');
  return (
    <form
      class="card key"
      onSubmit={(e) => {
        e.preventDefault();
        if (key.trim()) onSubmit(key.trim());
      }}
    >
      <h1>API key</h1>
      <p>This engine asks for an API key. It is kept in this tab only, and sent only to this engine.</p>
      {message && (
        <p class="error" role="alert">
          {message}
        </p>
      )}
      <label for="api-key">Key</label>
      <input
        id="api-key"
        type="password"
        autocomplete="off"
        value={key}
        onInput={(e) => setKey(e.currentTarget.value)}
        autofocus
      />
      <button type="submit">Open the console</button>
    </form>
  );
}
