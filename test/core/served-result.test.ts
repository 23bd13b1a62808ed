/**
 * What a tool may return or throw instead of running (core/served-result.ts): a served result is
 * logged as it is with its source; TurnStoppedByTool ends the turn as failed (kind `tool`), also
 * when several calls of one step throw it (none left unhandled).
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  defineAgent,
  MemorySink,
  runTurn,
  ScriptedModel,
  servedResult,
  tool,
  TurnStoppedByTool,
} from '../../src/index.ts';

const calls = (n: number) => ({
  toolCalls: Array.from({ length: n }, (_, i) => ({ id: `c${i}`, name: 't', input: { i } })),
});

describe('served results and tools that stop the turn', () => {
  it('a served result is the call’s result as it is, marked with its source', async () => {
    const t = tool({
      name: 't',
      description: 't',
      input: z.object({ i: z.number() }),
      execute: () => servedResult({ type: 'text', value: 'from the record' }, 'reused'),
    });
    const sink = new MemorySink();
    const model = new ScriptedModel([calls(1), { text: 'ok' }]);
    const r = await runTurn(defineAgent({ name: 'a', model, tools: [t] }), { sink, input: 'go' });
    expect(r.reason).toBe('completed');
    expect(sink.ofType('tool/result').map((e) => [e.data.output, e.data.source])).toEqual([
      [{ type: 'text', value: 'from the record' }, 'reused'],
    ]);
  });

  it('TurnStoppedByTool fails the turn with its code, from one call or several at once', async () => {
    for (const n of [1, 3]) {
      const t = tool({
        name: 't',
        description: 't',
        input: z.object({ i: z.number() }),
        effect: 'idempotent',
        execute: async ({ i }) => {
          await new Promise((r) => setTimeout(r, 5 * i));
          throw new TurnStoppedByTool('rerun_mismatch', `call ${i} has no recorded result`);
        },
      });
      const model = new ScriptedModel([calls(n), { text: 'never' }]);
      const r = await runTurn(defineAgent({ name: 'a', model, tools: [t] }), { sink: new MemorySink(), input: 'go' });
      expect(r.reason).toBe('failed');
      expect(r.error).toMatchObject({ kind: 'tool', code: 'rerun_mismatch', message: 'call 0 has no recorded result' });
    }
    // The other calls' rejections were handled: give them time to surface if they were not.
    await new Promise((r) => setTimeout(r, 50));
  });
});
