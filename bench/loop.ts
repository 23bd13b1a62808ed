/**
 * The runtime's own overhead per step: 200 runs × 20 tool steps on a zero-latency scripted
 * model with an in-memory sink, so everything measured is Keel (plus the AI SDK stream plumbing).
 * The sink keeps every durable event; deltas are delivered to it and not kept, as a live-only
 * consumer of deltas would do.
 * Run with `npm run bench:loop`.
 */
import { z } from 'zod';
import { defineAgent, MemorySink, runTurn, ScriptedModel, tool, type ScriptedResponse } from '../src/index.ts';

const RUNS = Number(process.env.RUNS ?? 200);
const TOOL_STEPS = Number(process.env.TOOL_STEPS ?? 20);

function makeAgent() {
  const script: ScriptedResponse[] = [];
  for (let i = 0; i < TOOL_STEPS; i++) script.push({ text: 'working', toolCalls: [{ name: 'inc', input: { n: i } }] });
  script.push({ text: 'done' });
  return defineAgent({
    name: 'bench',
    model: new ScriptedModel(script, { loop: true }),
    system: 'bench',
    tools: [
      tool({ name: 'inc', description: 'increments', input: z.object({ n: z.number() }), execute: ({ n }) => n + 1 }),
    ],
    limits: { maxSteps: TOOL_STEPS + 1 },
  });
}

async function once(agent: ReturnType<typeof makeAgent>): Promise<number> {
  const sink = new MemorySink({ keepDeltas: false });
  const r = await runTurn(agent, { sink, input: 'go' });
  if (r.reason !== 'completed' || r.steps !== TOOL_STEPS + 1)
    throw new Error(`unexpected end: ${r.reason} after ${r.steps} steps`);
  return r.steps;
}

async function sequential(): Promise<{ steps: number; ms: number }> {
  const agent = makeAgent();
  let steps = 0;
  const t0 = performance.now();
  for (let i = 0; i < RUNS; i++) steps += await once(agent);
  return { steps, ms: performance.now() - t0 };
}

async function concurrent(): Promise<{ steps: number; ms: number }> {
  const agents = Array.from({ length: RUNS }, makeAgent);
  const t0 = performance.now();
  const steps = (await Promise.all(agents.map(once))).reduce((a, b) => a + b, 0);
  return { steps, ms: performance.now() - t0 };
}

// Warm up the JIT before measuring.
for (let i = 0; i < 20; i++) await once(makeAgent());

const seq = await sequential();
const con = await concurrent();
const fmt = (r: { steps: number; ms: number }) =>
  `${((r.ms * 1000) / r.steps).toFixed(1)} µs/step, ${Math.round(r.steps / (r.ms / 1000)).toLocaleString('en-US')} steps/s (${r.steps} steps in ${r.ms.toFixed(0)} ms)`;
console.log(
  `keel loop overhead: ${RUNS} runs × ${TOOL_STEPS} tool steps (+1 final step each), zero-latency scripted model, in-memory sink, node ${process.version}`,
);
console.log(`  one run at a time : ${fmt(seq)}`);
console.log(`  all runs at once  : ${fmt(con)}`);
