import { portableMessages, type Message, type ProviderPromptBuilder } from '../model/index.ts';
import type { MessageChain } from './prompt-hash.ts';

/**
 * A turn's conversation carried into the next turn: an in-memory chat passes a turn's result
 * `conversation` back as the next turn's `history`. That turn would walk the whole history again
 * (make it portable, look up each message's chain link and provider rendering), a cost that grows
 * with the conversation at every turn. Instead, what the finished turn computed over the messages
 * it started with is taken over: the messages are compared by identity with a copy made at the
 * turn's end, and only what differs or came after (the turn's own messages, anything the caller
 * added) is walked.
 *
 * Messages are immutable once in a conversation (see prompt-hash.ts): a caller that changes a
 * message in place breaks the per-message caches as it breaks this one. Replacing, removing or
 * adding messages in the array is fine: the copy tells where it still matches.
 */
interface Carried {
  /** The conversation as its turn ended: the caller owns the array and may change it afterwards. */
  readonly messages: readonly Message[];
  /** How many first messages were portable when the turn started (its history): the turn's own may not be. */
  readonly portable: number;
  readonly chain: MessageChain;
  /** How many first messages the chain hashed, and the prompt rendered. */
  readonly hashed: number;
  readonly prompt: ProviderPromptBuilder;
  readonly rendered: number;
}

/**
 * Kept on the conversation array itself, not in a WeakMap: it lives as long as the array, and a
 * conversation nobody passes back costs the collector nothing more (a WeakMap entry per turn did).
 */
const CARRIED = Symbol('keel.carried');
type CarryingArray = readonly Message[] & { [CARRIED]?: Carried };

/** Called when a turn ends: its conversation may come back as a history. */
export function carryConversation(
  conversation: readonly Message[],
  portable: number,
  chain: MessageChain,
  prompt: ProviderPromptBuilder,
): void {
  const value: Carried = {
    messages: conversation.slice(),
    portable,
    chain,
    hashed: chain.hashedOf(conversation),
    prompt,
    rendered: prompt.renderedOf(conversation),
  };
  // Not enumerable: copies, JSON and equality checks of the array do not see it.
  Object.defineProperty(conversation, CARRIED, { value, configurable: true, writable: true, enumerable: false });
}

/**
 * The portable working conversation of a turn that starts from `history`, and, when it is a
 * conversation a turn returned, how many of its first messages are the same as that turn's (then
 * `adopt` starts the chain and the prompt from them).
 */
export function startConversation(history: readonly Message[]): {
  conversation: Message[];
  adopt?: (chain: MessageChain, prompt: ProviderPromptBuilder) => void;
} {
  const c = Object.hasOwn(history, CARRIED) ? (history as CarryingArray)[CARRIED] : undefined;
  if (!c) return { conversation: portableMessages(history) };
  const limit = Math.min(c.portable, c.messages.length, history.length);
  let same = 0;
  while (same < limit && history[same] === c.messages[same]) same++;
  const conversation = c.messages.slice(0, same).concat(portableMessages(history.slice(same)));
  return {
    conversation,
    adopt: (chain, prompt) => {
      chain.adopt(c.chain, conversation, Math.min(same, c.hashed));
      prompt.adopt(c.prompt, conversation, Math.min(same, c.rendered));
    },
  };
}
