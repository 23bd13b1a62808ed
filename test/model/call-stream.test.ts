import { describe, expect, it } from 'vitest';
import type { LanguageModelV4StreamResult } from '@ai-sdk/provider';
import { callModel } from '../../src/model/call.ts';
import { ScriptedModel } from '../../src/index.ts';

/**
 * A model call reads the provider's stream and lets go of it, whether it read it to the end,
 * failed or was aborted: no stream is left locked to a reader nobody uses.
 */
const prompt = [{ role: 'user' as const, content: [{ type: 'text' as const, text: 'hi' }] }];

/** A scripted model that hands out its streams to the test. */
function watched(responses: ConstructorParameters<typeof ScriptedModel>[0]) {
  const model = new ScriptedModel(responses);
  const streams: ReadableStream[] = [];
  const doStream = model.doStream.bind(model);
  model.doStream = async (o): Promise<LanguageModelV4StreamResult> => {
    const r = await doStream(o);
    streams.push(r.stream);
    return r;
  };
  return { model, streams };
}

describe('callModel and the provider stream', () => {
  it('releases the stream once it read it to the end', async () => {
    const { model, streams } = watched([{ text: 'hello there' }]);
    const r = await callModel(model, { prompt }, new AbortController().signal);
    expect(r.finishReason).toBe('stop');
    expect(streams).toHaveLength(1);
    expect(streams[0]!.locked).toBe(false);
  });

  it('releases the stream after an error part, and after an abort', async () => {
    const failing = watched([{ text: 'a b c', error: { kind: 'server', message: 'boom', afterChunks: 1 } }]);
    await expect(callModel(failing.model, { prompt }, new AbortController().signal)).rejects.toThrow();
    expect(failing.streams[0]!.locked).toBe(false);

    const slow = watched([{ text: 'a b c d', chunkDelayMs: 20 }]);
    const ctl = new AbortController();
    const call = callModel(slow.model, { prompt }, ctl.signal, () => ctl.abort());
    await expect(call).rejects.toThrow();
    expect(slow.streams[0]!.locked).toBe(false);
  });
});
