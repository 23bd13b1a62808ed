import { describe, expect, it } from 'vitest';
import { estimateTokens, promptHash, toProviderPrompt, type Message } from '../../src/index.ts';

/**
 * What Keel computes once per message (its hash, its link in a prompt's running hash, its provider
 * rendering, its size) is kept on the message itself (src/model/message-memo.ts). The message must
 * look unchanged to its owner, a copy must not take the values along, a frozen message must work,
 * and a tool message that gained results must be computed again.
 */
const parts = { system: null, tools: null, settings: {} };
const fresh = (): Message[] => [
  { id: 'u1', role: 'user', content: [{ type: 'text', text: 'count' }] },
  { id: 'a1', role: 'assistant', content: [{ type: 'tool-call', toolCallId: 'c1', toolName: 'inc', input: { n: 1 } }] },
  {
    id: 't1',
    role: 'tool',
    content: [{ type: 'tool-result', toolCallId: 'c1', toolName: 'inc', output: { type: 'json', value: 2 } }],
  },
];

/** Everything that reads a message's memo. */
const computeAll = (messages: Message[]) => ({
  hash: promptHash(parts, messages),
  prompt: toProviderPrompt('sys', messages),
  tokens: estimateTokens(messages),
});

describe('per-message memo', () => {
  it('leaves the messages as their owner sees them: JSON, keys, equality, spreads', () => {
    const messages = fresh();
    const before = JSON.stringify(messages);
    computeAll(messages);
    expect(JSON.stringify(messages)).toBe(before);
    expect(messages).toStrictEqual(fresh());
    for (const [i, m] of messages.entries()) {
      expect(Object.keys(m)).toEqual(Object.keys(fresh()[i]!));
      expect(Object.getOwnPropertySymbols({ ...m })).toEqual([]);
    }
  });

  it('gives the same results as fresh messages, computed again and after a copy is changed', () => {
    const messages = fresh();
    const first = computeAll(messages);
    expect(computeAll(messages)).toEqual(first);
    expect(computeAll(fresh())).toEqual(first);
    // A copy with other content does not take the original's values along.
    const changed = messages.map((m) =>
      m.role === 'user' ? { ...m, content: [{ type: 'text' as const, text: 'count twice' }] } : m,
    );
    const other = computeAll(changed);
    expect(other.hash).not.toBe(first.hash);
    expect(other.prompt[1]).toEqual({ role: 'user', content: [{ type: 'text', text: 'count twice' }] });
    expect(other.tokens).toBe(computeAll(structuredClone(changed)).tokens);
  });

  it('works for frozen messages', () => {
    const messages = fresh().map((m) => Object.freeze(m));
    expect(computeAll(messages)).toEqual(computeAll(fresh()));
    expect(computeAll(messages)).toEqual(computeAll(fresh()));
    expect(Object.getOwnPropertySymbols(messages[0]!)).toEqual([]);
  });

  it('computes a tool message again once it gained results', () => {
    const messages = fresh();
    const tool = messages[2]! as Extract<Message, { role: 'tool' }>;
    const one = computeAll(messages);
    tool.content.push({ type: 'tool-result', toolCallId: 'c2', toolName: 'inc', output: { type: 'json', value: 3 } });
    const two = computeAll(messages);
    expect(two.hash).not.toBe(one.hash);
    expect(two.hash).toBe(computeAll(structuredClone(messages)).hash);
    expect(two.prompt.at(-1)).toEqual({
      role: 'tool',
      content: [
        { type: 'tool-result', toolCallId: 'c1', toolName: 'inc', output: { type: 'json', value: 2 } },
        { type: 'tool-result', toolCallId: 'c2', toolName: 'inc', output: { type: 'json', value: 3 } },
      ],
    });
    expect(two.tokens).toBeGreaterThan(one.tokens);
  });
});
