import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  defineAgent,
  MemorySink,
  portableMessages,
  promptHash,
  runTurn,
  ScriptedModel,
  tool,
  type Message,
  type ScriptedResponse,
} from '../../src/index.ts';

/**
 * A turn given the previous turn's `conversation` as its history takes over what that turn
 * computed (src/core/carried-conversation.ts). Whatever the caller did to the array, the requests
 * must be exactly those of a turn given a copy, which computes everything from the messages.
 */
const lookup = tool({
  name: 'lookup',
  description: 'lookup',
  input: z.object({ q: z.string() }),
  idempotent: true,
  execute: ({ q }) => `found ${q}`,
});

/** Per turn: a tool step with reasoning, then an answer with reasoning. */
function script(turns: number): ScriptedResponse[] {
  const out: ScriptedResponse[] = [];
  for (let t = 1; t <= turns; t++) {
    out.push({
      reasoning: `think ${t}`,
      reasoningSignature: `sig-${t}`,
      toolCalls: [{ id: `c${t}`, name: 'lookup', input: { q: `q${t}` } }],
    });
    out.push({ reasoning: `answer ${t}`, reasoningSignature: `sig-a${t}`, text: `answer ${t}` });
  }
  return out;
}

/**
 * Runs `turns` turns, each from what `next` makes of the previous turn's conversation. Returns the
 * prompts sent, the fingerprints recorded, and each fingerprint computed from scratch: the
 * messages of that request (the turn's history made portable, then the turn's own messages up to
 * the request) through `promptHash`, which shares no state with the turns.
 */
async function chat(turns: number, next: (conversation: Message[], turn: number) => Message[]) {
  const model = new ScriptedModel(script(turns));
  const agent = defineAgent({ name: 'carried', model, system: 'Be brief.', tools: [lookup] });
  const sink = new MemorySink();
  const expected: string[] = [];
  let history: Message[] = [];
  for (let turn = 1; turn <= turns; turn++) {
    const before = portableMessages([...history]);
    const headers = sink.ofType('request/header').length;
    const r = await runTurn(agent, { sink, history, input: `question ${turn}`, turn });
    expect(r.reason).toBe('completed');
    for (const h of sink.ofType('request/header').slice(headers)) {
      const messages = [...before, ...r.added].slice(0, h.data.context.messages);
      expected.push(promptHash({ system: h.data.system, tools: h.data.tools, settings: h.data.settings }, messages));
    }
    history = next(r.conversation, turn);
  }
  return {
    prompts: model.calls.map((c) => c.prompt),
    fingerprints: sink.ofType('request/header').map((e) => e.data.promptHash),
    expected,
    last: history,
  };
}

describe('a conversation carried from turn to turn', () => {
  it('sends the same prompts and records the same fingerprints as a turn given a copy of its history', async () => {
    const carried = await chat(4, (c) => c);
    const copied = await chat(4, (c) => [...c]);
    expect(carried.prompts).toEqual(copied.prompts);
    expect(carried.fingerprints).toEqual(carried.expected);
    expect(copied.fingerprints).toEqual(copied.expected);
    expect(new Set(carried.fingerprints).size).toBe(8);
    // No reasoning crosses a turn, carried or not.
    expect(carried.prompts[2]!.flatMap((m) => (m.role === 'assistant' ? m.content.map((p) => p.type) : []))).toEqual([
      'tool-call',
      'text',
    ]);
  });

  it('follows what the caller did to the array: a replaced, a removed and an added message', async () => {
    // Each edit falls among the messages the next turn would take over (its history's), or after them.
    const edit = (c: Message[], turn: number): Message[] => {
      if (turn === 1) c.push({ id: 'extra-1', role: 'user', content: [{ type: 'text', text: 'one more thing' }] });
      if (turn === 2)
        c[0] = { id: 'replaced', role: 'user', content: [{ type: 'text', text: 'another first question' }] };
      if (turn === 3) c.splice(1, 2);
      return c;
    };
    const carried = await chat(4, edit);
    const copied = await chat(4, (c, turn) => edit([...c], turn));
    expect(carried.prompts).toEqual(copied.prompts);
    expect(carried.fingerprints).toEqual(carried.expected);
    // The edits reached the requests.
    expect(JSON.stringify(carried.prompts[2])).toContain('one more thing');
    expect(JSON.stringify(carried.prompts[4])).toContain('another first question');
    expect(JSON.stringify(carried.prompts[6])).not.toContain('"q1"');
  });

  it('is invisible in the returned array', async () => {
    const { last } = await chat(2, (c) => c);
    expect(Object.keys(last)).toEqual(last.map((_, i) => String(i)));
    expect(
      Object.getOwnPropertySymbols(last).filter((k) => Object.prototype.propertyIsEnumerable.call(last, k)),
    ).toEqual([]);
    expect(JSON.parse(JSON.stringify(last))).toEqual([...last]);
    expect(last).toStrictEqual([...last]);
  });
});
