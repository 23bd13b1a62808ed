/**
 * Effect classes (ADR-0018) in the loop: which tools get a durable point before they start, the
 * deprecated `idempotent` flag, the declarations `tool()` accepts, and the idempotency key a tool
 * sees. The crash behaviour is in effects-crash.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { z } from 'zod';
import { defineAgent, runTurn, ScriptedModel, tool, type ToolEffect } from '../../src/index.ts';
import { ProbeSink } from '../support/turn-helpers.ts';

/** Runs one step calling the tool once, then a final answer; returns the durable points seen when the tool started. */
async function oneCall(declared: Parameters<typeof tool>[0] extends infer O ? Partial<O> : never) {
  const sink = new ProbeSink();
  const seen: Array<{ durablePoints: number; logged: boolean; key: string }> = [];
  const t = tool({
    name: 'act',
    description: 'acts',
    input: z.object({ n: z.number() }),
    ...declared,
    execute: (_input, ctx) => {
      seen.push({
        durablePoints: sink.durablePoints,
        logged: sink.events.some((e) => e.type === 'tool/call'),
        key: ctx.idempotencyKey,
      });
      return 'ok';
    },
  } as Parameters<typeof tool>[0]);
  const model = new ScriptedModel([{ toolCalls: [{ id: 'c1', name: 'act', input: { n: 1 } }] }, { text: 'done' }]);
  const result = await runTurn(defineAgent({ name: 'fx', model, tools: [t] }), { sink, input: 'go', scope: 'run-1' });
  expect(result.reason).toBe('completed');
  const call = sink.events.find((e) => e.type === 'tool/call')!;
  return { tool: t, seen: seen[0]!, sink, callKey: (call.data as { idempotencyKey: string }).idempotencyKey };
}

describe('effect classes', () => {
  it('a read-only tool and an idempotent one start with no durable point before them; an effectful one after its call is durable', async () => {
    const readOnly = await oneCall({ effect: 'read-only' });
    expect(readOnly.tool.effect).toBe('read-only');
    expect(readOnly.seen.durablePoints).toBe(0);
    const idempotent = await oneCall({ effect: 'idempotent' });
    expect(idempotent.seen.durablePoints).toBe(0);
    const effectful = await oneCall({ effect: 'effectful' });
    expect(effectful.seen.durablePoints).toBe(1);
    expect(effectful.seen.logged).toBe(true);
    // Durable points of the whole turn: the step's end and the turn's end; one more for the effectful call.
    expect(readOnly.sink.durablePoints).toBe(2);
    expect(effectful.sink.durablePoints).toBe(3);
  });

  it('the default stays effectful; the deprecated `idempotent` flag still works', async () => {
    const byDefault = await oneCall({});
    expect(byDefault.tool.effect).toBe('effectful');
    expect(byDefault.tool.idempotent).toBe(false);
    expect(byDefault.seen.durablePoints).toBe(1);
    const legacyTrue = await oneCall({ idempotent: true });
    expect(legacyTrue.tool.effect).toBe('idempotent');
    expect(legacyTrue.tool.idempotent).toBe(true);
    expect(legacyTrue.seen.durablePoints).toBe(0);
    const legacyFalse = await oneCall({ idempotent: false });
    expect(legacyFalse.tool.effect).toBe('effectful');
    expect(legacyFalse.seen.durablePoints).toBe(1);
  });

  it('tool() derives `idempotent` from the effect and refuses a contradiction', () => {
    const base = { name: 'x', description: 'x', input: z.object({}), execute: () => 'ok' };
    const effects: Array<[ToolEffect, boolean]> = [
      ['read-only', true],
      ['idempotent', true],
      ['effectful', false],
    ];
    for (const [effect, idempotent] of effects) expect(tool({ ...base, effect }).idempotent).toBe(idempotent);
    expect(tool({ ...base, effect: 'read-only', idempotent: true }).effect).toBe('read-only');
    expect(() => tool({ ...base, effect: 'effectful', idempotent: true })).toThrow(/contradicts/);
    expect(() => tool({ ...base, effect: 'idempotent', idempotent: false })).toThrow(/contradicts/);
    const checked = tool({ ...base, onUnknownOutcome: 'ask_human', check: () => ({ done: false }) });
    expect(checked.onUnknownOutcome).toBe('ask_human');
    expect(typeof checked.check).toBe('function');
  });

  it('the key a tool sees is the one its tool/call records, and the same for the same call in the same place', async () => {
    const a = await oneCall({ effect: 'read-only' });
    const b = await oneCall({ effect: 'effectful' });
    expect(a.seen.key).toBe(a.callKey);
    expect(a.seen.key).toMatch(/^[0-9a-f]{32}$/);
    // Same scope, turn, step, position, tool and input: the same key, whatever the effect class.
    expect(b.seen.key).toBe(a.seen.key);
  });
});
