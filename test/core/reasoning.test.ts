import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, MemorySink, portableMessages, runTurn, ScriptedModel, tool } from '../../src/index.ts';
import { reasoningPartsIn, toolCallIdsIn, toolResultsIn, userTexts } from '../support/turn-helpers.ts';

const lookup = tool({
  name: 'lookup',
  description: 'lookup',
  input: z.object({ q: z.string() }),
  execute: ({ q }) => `found ${q}`,
});

describe('opaque reasoning', () => {
  it('stays in the working conversation within the turn and never crosses into the next turn', async () => {
    const model = new ScriptedModel([
      {
        reasoning: 'I should look it up.',
        reasoningSignature: 'sig-1',
        toolCalls: [{ id: 'c1', name: 'lookup', input: { q: 'x' } }],
      },
      { reasoning: 'Now I can answer.', reasoningSignature: 'sig-2', text: 'It is x.' },
      { text: 'Second turn answer.' },
    ]);
    const agent = defineAgent({ name: 't', model, tools: [lookup] });
    const sink = new MemorySink();
    const first = await runTurn(agent, { sink, input: 'what is x?' });

    expect(first.reason).toBe('completed');
    const assistants = sink.ofType('assistant/message').map((e) => e.data.message);
    expect(assistants[0]!.content[0]).toEqual({
      type: 'reasoning',
      text: 'I should look it up.',
      providerMetadata: { scripted: { signature: 'sig-1' } },
    });
    // Inside the turn the next step sends the reasoning back with its signature.
    expect(reasoningPartsIn(model.calls[1])).toEqual([
      { text: 'I should look it up.', providerOptions: { scripted: { signature: 'sig-1' } } },
    ]);
    expect(
      first.conversation
        .filter((m) => m.role === 'assistant')
        .flatMap((m) => (m.role === 'assistant' ? m.content.filter((p) => p.type === 'reasoning') : [])),
    ).toHaveLength(2);

    const second = await runTurn(agent, { sink, history: first.conversation, input: 'and y?', turn: 2 });
    expect(second.reason).toBe('completed');
    // The next turn gets the tool work and the answers, but no reasoning at all.
    expect(reasoningPartsIn(model.calls[2])).toEqual([]);
    expect(model.calls[2]!.prompt.flatMap((m) => (m.role === 'assistant' ? m.content.map((p) => p.type) : []))).toEqual(
      ['tool-call', 'text'],
    );
    expect(toolCallIdsIn(model.calls[2])).toEqual(['c1']);
    expect(toolResultsIn(model.calls[2]).map((r) => r.toolCallId)).toEqual(['c1']);
    expect(userTexts(model.calls[2])).toEqual(['what is x?', 'and y?']);
    // ...and neither does the new turn's working conversation.
    expect(JSON.stringify(second.conversation)).not.toContain('sig-');
  });

  it('drops an assistant message that was reasoning only, keeps the rest (portableMessages)', () => {
    const portable = portableMessages([
      { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }] },
      {
        id: 'a1',
        role: 'assistant',
        content: [{ type: 'reasoning', text: 'hmm', providerMetadata: { p: { signature: 's' } } }],
      },
      {
        id: 'a2',
        role: 'assistant',
        content: [
          { type: 'reasoning', text: 'plain' },
          { type: 'text', text: 'hello' },
        ],
      },
    ]);
    expect(portable).toEqual([
      { id: 'u', role: 'user', content: [{ type: 'text', text: 'hi' }] },
      { id: 'a2', role: 'assistant', content: [{ type: 'text', text: 'hello' }] },
    ]);
  });

  it('streams reasoning as reasoning deltas of the message it belongs to', async () => {
    const model = new ScriptedModel([{ reasoning: 'thinking hard', reasoningSignature: 's', text: 'answer' }]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model }), { sink, input: 'q' });
    const message = sink.ofType('assistant/message')[0]!.data.message;
    const reasoning = sink.deltas.filter((d) => d.type === 'reasoning/delta');
    expect(reasoning.map((d) => d.messageId)).toEqual([message.id]);
    expect(reasoning.map((d) => d.delta).join('')).toBe('thinking hard');
    expect(result.conversation.at(-1)).toEqual(message);
  });
});
