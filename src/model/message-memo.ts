import type { LanguageModelV4Message } from '@ai-sdk/provider';
import type { Message } from './messages.ts';

/**
 * What is computed once for a message and reused by every later step and turn that sends it: its
 * hash and its link in a prompt's running hash (core/prompt-hash.ts), its provider rendering
 * (messages.ts), its size in characters (session/compaction.ts). Messages are immutable once in a
 * conversation, but for a tool message gaining results during its step: each value is kept with
 * the result count it was computed at (`resultsIn`), and computed again when that changed. A size
 * of -1: not computed yet.
 */
export interface MessageMemo {
  hashSize: number;
  hash: string;
  /** The running hash before this message and after it, the last time a chain took it in. */
  linkSize: number;
  linkPrev: string;
  linkHash: string;
  renderSize: number;
  rendered: LanguageModelV4Message | undefined;
  charsSize: number;
  chars: number;
}

/**
 * Kept on the message itself, as a non-enumerable symbol property (JSON, spreads, `Object.keys`
 * and equality checks do not see it; a copy of a message does not take it along), not in module
 * `WeakMap`s keyed by the message: one small object a message instead of an entry in each of four
 * ephemeron tables, each entry with a value object of its own, tables that grow until a full
 * collection. It lives and dies with its message (ADR-0032). A frozen message cannot take a
 * property: its memo is in a `WeakMap`.
 */
const MEMO = Symbol('keel.message-memo');
type Memoized = Message & { [MEMO]?: MessageMemo };
const frozen = new WeakMap<Message, MessageMemo>();

/** The memo of a message, created empty on first use. */
export function memoOf(m: Message): MessageMemo {
  const own = (m as Memoized)[MEMO];
  if (own !== undefined) return own;
  if (!Object.isExtensible(m)) {
    let memo = frozen.get(m);
    if (memo === undefined) frozen.set(m, (memo = emptyMemo()));
    return memo;
  }
  const memo = emptyMemo();
  Object.defineProperty(m, MEMO, { value: memo, configurable: true, writable: false, enumerable: false });
  return memo;
}

// Every memo with the same fields in the same order: one shape for V8.
const emptyMemo = (): MessageMemo => ({
  hashSize: -1,
  hash: '',
  linkSize: -1,
  linkPrev: '',
  linkHash: '',
  renderSize: -1,
  rendered: undefined,
  charsSize: -1,
  chars: 0,
});
