/**
 * The inspector's only way to the server: `keel/client`, the typed client any web app uses, on
 * this page's origin, with the API key the user typed (kept in sessionStorage for this tab). A 401
 * to any request, streams included, tells the app to ask for a key.
 */
import { createKeelClient, type KeelClient, type Page } from 'keel/client';

const KEY = 'keel.inspector.apiKey';

const keyListeners = new Set<() => void>();
const authListeners = new Set<() => void>();

export const apiKey = (): string | null => sessionStorage.getItem(KEY);

function connect(): KeelClient {
  return createKeelClient({
    baseUrl: location.origin,
    apiKey: apiKey() ?? undefined,
    fetch: async (request) => {
      const res = await fetch(request);
      if (res.status === 401) for (const f of authListeners) f();
      return res;
    },
  });
}

let client = connect();

/** The client, with the current key. */
export const keel = (): KeelClient => client;

export function setApiKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, key);
  client = connect();
  for (const f of keyListeners) f();
}

/** Called when the key changes (entered or dropped). */
export function onKeyChange(f: () => void): () => void {
  keyListeners.add(f);
  return () => keyListeners.delete(f);
}

/** Called when the API answers 401: no key, or a wrong one. */
export function onAuthRequired(f: () => void): () => void {
  authListeners.add(f);
  return () => authListeners.delete(f);
}

/**
 * Every row of a list, page after page (`list` reads one: a client method such as
 * `(q) => keel().experiments.items(id, q)`), up to `max` rows (more are left out: `truncated` says
 * so). For lists a page shows whole, like an experiment's items.
 */
export async function readAll<T>(
  list: (query: { limit: number; cursor?: string }) => Promise<Page<T>>,
  max = 10_000,
): Promise<{ data: T[]; truncated: boolean }> {
  const data: T[] = [];
  let cursor: string | null = null;
  for (;;) {
    const page: Page<T> = await list({
      limit: Math.min(1000, max - data.length),
      ...(cursor !== null ? { cursor } : {}),
    });
    data.push(...page.data);
    cursor = page.next_cursor;
    if (cursor === null) return { data, truncated: false };
    if (data.length >= max) return { data, truncated: true };
  }
}
