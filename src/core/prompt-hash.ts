import { hash } from 'node:crypto';
import canonicalize from 'canonicalize';
import { canonicalJson } from './canonical-json.ts';
import { resultsIn, type JsonValue, type Message } from '../model/index.ts';
import { memoOf } from '../model/message-memo.ts';
import type { ToolSchema } from './events.ts';

/**
 * The fingerprint of exactly what one model request contained, recorded in its request header.
 * The replay check rebuilds the request from the log and compares fingerprints, so any edit to the
 * log (a message, the system prompt, a tool schema) that would change the request is detected.
 * Canonical JSON (RFC 8785) makes it independent of key order after a storage round trip.
 *
 * Since ADR-0008 the messages enter through a running hash, so that the prompt of step k + 1 (the
 * prompt of step k plus what step k added) costs only the new messages:
 *
 *   chain₀ = sha256("keel/prompt/v2"), chainᵢ = sha256(chainᵢ₋₁ + messageHash(mᵢ))
 *   promptHash = sha256(system hash + "\n" + tools hash + "\n" + settings hash + "\n" + chainₙ)
 */
// One-shot hashing: no Hash object per call (several per step).
const sha256 = (s: string): string => hash('sha256', s, 'hex');

/** The content address of a JSON text, as the blob table keys it. */
export const contentHash = (json: string): string => `sha256:${sha256(json)}`;

/** A message's hash, computed once (again only when a tool message gained results since: see MessageMemo). */
export function messageHash(m: Message): string {
  const size = resultsIn(m);
  const memo = memoOf(m);
  if (memo.hashSize === size) return memo.hash;
  const h = sha256(canonicalJson(m));
  memo.hash = h;
  memo.hashSize = size;
  return h;
}

const settingsHashes = new WeakMap<Record<string, JsonValue>, string>();

/** Settings records are built once per configuration (see the loop): their hash is too. */
export function settingsHash(settings: Record<string, JsonValue>): string {
  let h = settingsHashes.get(settings);
  if (h === undefined) settingsHashes.set(settings, (h = sha256(canonicalJson(settings))));
  return h;
}

const CHAIN_START = sha256('keel/prompt/v2');

/**
 * The running hash of a conversation, extended by the messages added since the last call on the
 * same array; a new array (compaction, resumption) starts over. The last message may be a tool
 * message that gained results since: it is hashed again.
 */
export class MessageChain {
  private source: readonly Message[] | undefined;
  private hashes: string[] = [];
  private lastSize = 0;

  of(messages: readonly Message[]): string {
    if (messages !== this.source || this.hashes.length > messages.length) {
      this.source = messages;
      this.hashes.length = 0;
    }
    const n = this.hashes.length;
    if (n > 0) {
      const last = messages[n - 1]!;
      if (last.role === 'tool' && last.content.length !== this.lastSize) this.hashes.pop();
    }
    let h = this.hashes.at(-1) ?? CHAIN_START;
    for (let i = this.hashes.length; i < messages.length; i++) {
      const m = messages[i]!;
      const size = resultsIn(m);
      // The same message after the same prefix (the next turn's history, carried or kept in
      // memory): the link is known, the next turn does not hash its history again.
      const memo = memoOf(m);
      if (memo.linkSize === size && memo.linkPrev === h) h = memo.linkHash;
      else {
        const next = sha256(h + messageHash(m));
        memo.linkPrev = h;
        memo.linkSize = size;
        memo.linkHash = next;
        h = next;
      }
      this.hashes.push(h);
    }
    this.lastSize = resultsIn(messages.at(-1));
    return h;
  }

  /** How many first messages of `messages` this chain has hashed: none unless it was last extended on that array. */
  hashedOf(messages: readonly Message[]): number {
    return messages === this.source ? this.hashes.length : 0;
  }

  /**
   * Starts this chain on `messages` from what `from` hashed of its first `count` messages, the same
   * message objects in the same order (see carried-conversation.ts): they are not hashed again.
   */
  adopt(from: MessageChain, messages: readonly Message[], count: number): void {
    const n = Math.min(count, from.hashes.length, messages.length);
    this.source = messages;
    this.hashes = from.hashes.slice(0, n);
    this.lastSize = n > 0 ? resultsIn(messages[n - 1]) : 0;
  }
}

export interface PromptParts {
  /** Content hash of the system prompt's JSON, or null. */
  system: string | null;
  /** Content hash of the tool schemas' JSON array, or null. */
  tools: string | null;
  settings: Record<string, JsonValue>;
}

/** The fingerprint of a request from its parts and the running hash of its messages. */
export function promptFingerprint(parts: PromptParts, chain: string): string {
  return sha256(`${parts.system ?? ''}\n${parts.tools ?? ''}\n${settingsHash(parts.settings)}\n${chain}`);
}

/** The fingerprint of a request from scratch (the replay check, tests). */
export function promptHash(parts: PromptParts, messages: readonly Message[]): string {
  return promptFingerprint(parts, new MessageChain().of(messages));
}

/** What a request header written before ADR-0008 fingerprinted: system and tools inline. */
export interface PromptFingerprintInputV1 {
  system: string | null;
  tools: readonly ToolSchema[];
  settings: Record<string, JsonValue>;
  messages: readonly Message[];
}

/** The fingerprint of request headers written before ADR-0008 (header v1), for the replay check of old logs. */
export function promptHashV1(p: PromptFingerprintInputV1): string {
  return sha256(
    canonicalize({
      system: p.system,
      settings: p.settings,
      tools: p.tools.map((t) => sha256(canonicalize(t) ?? 'null')),
      messages: p.messages.map(messageHash),
    }) ?? 'null',
  );
}
