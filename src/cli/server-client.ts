/**
 * The client of the commands that talk to a running server (`keel chat`, `keel webhooks`): Keel's
 * own typed client (`keel/client`) on --url (default $KEEL_URL, else http://127.0.0.1:8787) with
 * --key (default $KEEL_API_KEY), and its errors explained for people.
 */
import { createKeelClient, KeelNetworkError, KeelProblem, type KeelClient } from '../client/index.ts';
import { UsageError, type Io } from './args.ts';

export function serverClient(command: string, io: Io, url: string | undefined, key: string | undefined): KeelClient {
  const base = url ?? (io.env.KEEL_URL || 'http://127.0.0.1:8787');
  if (!URL.canParse(base) || !['http:', 'https:'].includes(new URL(base).protocol))
    throw new UsageError(`${command}: --url must be an http(s) URL, not ${JSON.stringify(base)}`);
  const apiKey = key ?? io.env.KEEL_API_KEY;
  return createKeelClient({ baseUrl: base, ...(apiKey ? { apiKey } : {}) });
}

/** The message for a 401: how to pass a key. */
export const NEEDS_KEY = 'the server requires an API key: pass --key or set $KEEL_API_KEY (see keel keys create)';

/** What went wrong, for people: the API's problem detail, with a hint where one helps. */
export function explained(e: unknown): Error {
  if (e instanceof KeelNetworkError)
    return new Error(`${e.message}\n  start a server with "keel serve", or point --url (or $KEEL_URL) at one`);
  if (e instanceof KeelProblem && e.status === 401) return new Error(NEEDS_KEY);
  if (e instanceof KeelProblem) return new Error(`${e.message} (${e.type}, HTTP ${e.status})`);
  return e instanceof Error ? e : new Error(String(e));
}
