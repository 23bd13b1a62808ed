import { useState } from 'preact/hooks';
import { setApiKey } from './keel.ts';

/** Asked when the API answers 401: the key is kept in this tab's sessionStorage only. */
export function KeyPrompt(props: { wrong: boolean }) {
  const [key, setKey] = useState('');
  return (
    <form
      class="key-prompt card"
      onSubmit={(e) => {
        e.preventDefault();
        if (key.trim() !== '') setApiKey(key.trim());
      }}
    >
      <h2>API key</h2>
      <p>
        This server requires an API key (create one with <code>keel keys create &lt;tenant&gt;</code>). It is kept in
        this browser tab only.
      </p>
      {props.wrong && <p class="error">The server refused the key: enter another one.</p>}
      <input
        aria-label="API key"
        type="password"
        placeholder="keel_…"
        value={key}
        onInput={(e) => setKey(e.currentTarget.value)}
        autoFocus
      />
      <button type="submit">Use this key</button>
    </form>
  );
}
