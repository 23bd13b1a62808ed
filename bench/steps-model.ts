import { ScriptedModel, type ScriptedResponse } from '../src/index.ts';

/**
 * The benchmarks' zero-latency model: `toolSteps` steps that each call `inc`, then an answer. Each
 * run's step is told by how many tool results its conversation holds: deterministic per run, so
 * a worker that recovers a run asks it the same thing.
 */
export function stepsModel(toolSteps: number): ScriptedModel {
  return new ScriptedModel(
    [
      (call): ScriptedResponse => {
        const done = call.prompt.filter((m) => m.role === 'tool').length;
        return done >= toolSteps
          ? { text: 'done' }
          : { text: 'working', toolCalls: [{ id: `c${done + 1}`, name: 'inc', input: { n: done } }] };
      },
    ],
    { loop: true },
  );
}
