/**
 * The inspector's only way to the server: the public HTTP API, with the API key the user typed
 * (kept in sessionStorage for this tab). A 401 tells the app to ask for a key.
 */
const KEY = 'keel.inspector.apiKey';

/** An answer other than 2xx: the problem+json's detail when the server sent one. */
export class ApiError extends Error {
  readonly status: number;
  readonly problem: Record<string, unknown> | undefined;

  constructor(status: number, message: string, problem?: Record<string, unknown>) {
    super(message);
    this.status = status;
    this.problem = problem;
  }
}

export const apiKey = (): string | null => sessionStorage.getItem(KEY);

export function setApiKey(key: string | null): void {
  if (key === null) sessionStorage.removeItem(KEY);
  else sessionStorage.setItem(KEY, key);
  for (const f of keyListeners) f();
}

const keyListeners = new Set<() => void>();
const authListeners = new Set<() => void>();

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

export function authHeaders(): Record<string, string> {
  const key = apiKey();
  return key ? { authorization: `Bearer ${key}` } : {};
}

export async function request<T = unknown>(method: string, path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { ...authHeaders(), accept: 'application/json' };
  if (body !== undefined) headers['content-type'] = 'application/json';
  const res = await fetch(path, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}) });
  const type = res.headers.get('content-type') ?? '';
  const parsed: unknown = /json/.test(type) ? await res.json().catch(() => undefined) : await res.text();
  if (res.status === 401) for (const f of authListeners) f();
  if (!res.ok) {
    const problem = parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : undefined;
    throw new ApiError(res.status, String(problem?.detail ?? `${res.status} ${res.statusText}`), problem);
  }
  return parsed as T;
}

export const get = <T = unknown>(path: string) => request<T>('GET', path);
export const post = <T = unknown>(path: string, body?: unknown) => request<T>('POST', path, body);

/**
 * Every row of a list (`{data, next_cursor}`), page after page, up to `max` rows (more are left
 * out: `truncated` says so). For lists a page shows whole, like an experiment's items.
 */
export async function getAll<T>(path: string, max = 10_000): Promise<{ data: T[]; truncated: boolean }> {
  const data: T[] = [];
  let cursor: string | null = null;
  const sep = path.includes('?') ? '&' : '?';
  for (;;) {
    const limit = Math.min(1000, max - data.length);
    const page: { data: T[]; next_cursor: string | null } = await get(
      `${path}${sep}limit=${limit}${cursor !== null ? `&cursor=${encodeURIComponent(cursor)}` : ''}`,
    );
    data.push(...page.data);
    cursor = page.next_cursor;
    if (cursor === null) return { data, truncated: false };
    if (data.length >= max) return { data, truncated: true };
  }
}
