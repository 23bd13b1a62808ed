import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, MemorySink, runTurn, ScriptedModel, tool } from '../../src/index.ts';
import { textOfMessage } from '../support/turn-helpers.ts';

const note = tool({ name: 'note', description: 'note', input: z.object({ text: z.string() }), execute: () => 'noted' });

describe('deltas', () => {
  it('text deltas of each assistant message add up to its final text', async () => {
    const model = new ScriptedModel([
      { text: 'Let me write that down.', toolCalls: [{ id: 'n1', name: 'note', input: { text: 'milk, eggs' } }] },
      { chunks: ['Do', 'ne', ' — ', 'saved ', 'it.'] },
    ]);
    const sink = new MemorySink();
    const result = await runTurn(defineAgent({ name: 't', model, tools: [note] }), {
      sink,
      input: 'remember milk and eggs',
      turn: 5,
    });
    expect(result.reason).toBe('completed');

    const messages = sink.ofType('assistant/message').map((e) => e.data.message);
    expect(messages).toHaveLength(2);
    const texts = messages.map((m) =>
      sink.deltas
        .filter((d) => d.type === 'text/delta' && d.messageId === m.id)
        .map((d) => (d.type === 'text/delta' ? d.delta : ''))
        .join(''),
    );
    expect(texts).toEqual(messages.map(textOfMessage));
    expect(texts).toEqual(['Let me write that down.', 'Done — saved it.']);
    // Streamed in pieces, tagged with the turn and step they belong to.
    const second = sink.deltas.filter((d) => d.messageId === messages[1]!.id);
    expect(second.map((d) => d.type === 'text/delta' && d.delta)).toEqual(['Do', 'ne', ' — ', 'saved ', 'it.']);
    expect(new Set(second.map((d) => `${d.turn}/${d.step}`))).toEqual(new Set(['5/2']));
    // Every delta belongs to a message that was recorded.
    const ids = new Set(messages.map((m) => m.id));
    expect(sink.deltas.every((d) => ids.has(d.messageId))).toBe(true);

    // Tool input streams too, and adds up to the recorded arguments.
    const input = sink.deltas.filter((d) => d.type === 'tool-input/delta');
    expect(
      input.every(
        (d) =>
          d.type === 'tool-input/delta' &&
          d.toolCallId === 'n1' &&
          d.toolName === 'note' &&
          d.messageId === messages[0]!.id,
      ),
    ).toBe(true);
    expect(JSON.parse(input.map((d) => d.delta).join(''))).toEqual(sink.ofType('tool/call')[0]!.data.input);
  });

  it('deltas are never durable events', async () => {
    const model = new ScriptedModel([{ text: 'a b c' }]);
    const sink = new MemorySink({ keepDeltas: false });
    await runTurn(defineAgent({ name: 't', model }), { sink, input: 'x' });
    expect(sink.deltas).toEqual([]);
    expect(sink.events.some((e) => (e.type as string).endsWith('/delta'))).toBe(false);
    expect(textOfMessage(sink.ofType('assistant/message')[0]!.data.message)).toBe('a b c');
  });
});
