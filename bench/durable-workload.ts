/**
 * The workload of bench:durable and bench:instructions: runs of `toolSteps` tool steps + 1 answer
 * on a zero-latency scripted model, a trivial tool (a pure function), a 320-character system prompt.
 * The Keel module is passed in: bench:instructions counts another checkout's `src` with it.
 */
import { z } from 'zod';
import type * as Keel from '../src/index.ts';

export const SYSTEM =
  'You are Keel, a careful assistant working inside a durable agent runtime. Use the tools you are given ' +
  'to make progress one step at a time; call `inc` whenever a counter has to move, and never guess its ' +
  'value. Keep answers short and factual. When the work is done, say so plainly and summarize the result ' +
  'in one sentence.';

/** The model's answers: `toolSteps` calls of `inc`, then a final answer. */
export function benchScript(toolSteps: number): Keel.ScriptedResponse[] {
  const script: Keel.ScriptedResponse[] = [];
  for (let i = 0; i < toolSteps; i++) script.push({ text: 'working', toolCalls: [{ name: 'inc', input: { n: i } }] });
  script.push({ text: 'done' });
  return script;
}

/**
 * The bench agent. Its tool is a pure function, so it says it is idempotent (safe to run again
 * with the same idempotency key): its call needs no durable point before it runs, and a tool step
 * commits once (ADR-0008). `effectful: true` declares it not idempotent: two commits per tool step.
 */
export function benchAgent(
  keel: Pick<typeof Keel, 'defineAgent' | 'ScriptedModel' | 'tool'>,
  o: { toolSteps: number; effectful?: boolean },
): Keel.AgentDefinition {
  return keel.defineAgent({
    name: 'bench',
    // Calls are not kept: a long benchmark would hold every prompt it sent.
    model: new keel.ScriptedModel(benchScript(o.toolSteps), { loop: true, recordCalls: false }),
    system: SYSTEM,
    tools: [
      keel.tool({
        name: 'inc',
        description: 'increments',
        input: z.object({ n: z.number() }),
        idempotent: !o.effectful,
        execute: ({ n }) => n + 1,
      }),
    ],
    limits: { maxSteps: o.toolSteps + 1 },
  });
}
