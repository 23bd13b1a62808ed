import { createHash } from 'node:crypto';
import canonicalize from 'canonicalize';
import type { JsonValue, Message } from '../model/index.ts';
import type { ToolSchema } from './events.ts';

/**
 * A fingerprint of exactly what one model request contained, recorded in its request header.
 * The replay check rebuilds the request from the log and compares fingerprints, so any edit to the
 * log (a message, the system prompt, a tool schema) that would change the request is detected.
 * Canonical JSON (RFC 8785) makes it independent of key order after a storage round trip.
 */
const sha256 = (s: string): string => createHash('sha256').update(s).digest('hex');

// Messages are immutable once in the conversation, except a tool message that gains results
// during its step: its cache entry is keyed by how many results it had.
const cache = new WeakMap<Message, { size: number; hash: string }>();

export function messageHash(m: Message): string {
  const size = m.role === 'tool' ? m.content.length : 0;
  const hit = cache.get(m);
  if (hit && hit.size === size) return hit.hash;
  const hash = sha256(canonicalize(m) ?? 'null');
  cache.set(m, { size, hash });
  return hash;
}

export interface PromptFingerprintInput {
  system: string | null;
  tools: readonly ToolSchema[];
  settings: Record<string, JsonValue>;
  messages: readonly Message[];
}

// Tool schemas are created once per tool and never change.
const schemaCache = new WeakMap<ToolSchema, string>();

function schemaHash(t: ToolSchema): string {
  let h = schemaCache.get(t);
  if (h === undefined) {
    h = sha256(canonicalize(t) ?? 'null');
    schemaCache.set(t, h);
  }
  return h;
}

export function promptHash(p: PromptFingerprintInput): string {
  return sha256(
    canonicalize({ system: p.system, settings: p.settings, tools: p.tools.map(schemaHash), messages: p.messages.map(messageHash) }) ?? 'null',
  );
}
