/**
 * Large payloads (ADR-0040): the model-context read of a session with a 50 MB tool result against
 * the same session without it, on SQLite (a file, durable) and PostgreSQL. Each session has 20
 * turns (13 events each); the 50 MB result is in turn 10. Three reads each, medians of REPS:
 * - cold: a process that kept nothing and no snapshot (the path is folded from the log);
 * - snapshot: a process that kept nothing, the snapshot written by the cold read;
 * - warm: the state this process kept, with one new turn appended.
 * With the default view (the first 32 KiB and the reference) and, for contrast, `modelView: 'whole'`.
 * Run with `npm run bench:payloads` (BACKENDS=sqlite,postgres, REPS=3, MB=50,
 * KEEL_BENCH_DATABASE_URL for PostgreSQL).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import {
  newId,
  openSqliteStore,
  PostgresStore,
  Sessions,
  type LargePayloadOptions,
  type NewEvent,
  type Store,
} from '../src/index.ts';

const BACKENDS = (process.env.BACKENDS ?? 'sqlite,postgres').split(',') as Array<'sqlite' | 'postgres'>;
const REPS = Number(process.env.REPS ?? 3);
const MB = Number(process.env.MB ?? 50);
const TURNS = 20;
const PG_URL = process.env.KEEL_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const usage = { inputTokens: 1200, outputTokens: 80, cachedInputTokens: 0, reasoningTokens: 0 };

const BIG = (() => {
  const line = 'web-1 2026-12-05T11:00:00Z INFO request served in 12 ms, status 200, path /api/items\n';
  return line.repeat(Math.ceil((MB << 20) / line.length)).slice(0, MB << 20);
})();

/** One turn: a user message, a tool step (its result `output`) and a final answer. */
function turnEvents(turn: number, output: string): NewEvent[] {
  const a1 = newId();
  const tm = newId();
  const call = `call_${turn}`;
  const assistant = (id: string, content: unknown[]) =>
    ({
      type: 'assistant/message',
      turn,
      data: {
        message: { id, role: 'assistant', content },
        finishReason: 'stop',
        usage,
        cost: 0,
        timing: { startedAt: 0, durationMs: 1 },
      },
    }) as NewEvent;
  return [
    {
      type: 'turn/start',
      turn,
      data: { agent: { name: 'a', version: '1' }, model: { provider: 'b', modelId: 'b' }, resumed: false },
    },
    {
      type: 'user/message',
      turn,
      data: {
        message: { id: newId(), role: 'user', content: [{ type: 'text', text: `question ${turn}` }] },
        via: 'input',
      },
    },
    { type: 'step/start', turn, step: 1, data: {} },
    assistant(a1, [{ type: 'tool-call', toolCallId: call, toolName: 'read_log', input: { n: turn } }]),
    {
      type: 'tool/call',
      turn,
      step: 1,
      data: {
        toolCallId: call,
        toolName: 'read_log',
        input: { n: turn },
        idempotencyKey: call,
        assistantMessageId: a1,
      },
    },
    {
      type: 'tool/result',
      turn,
      step: 1,
      data: {
        toolCallId: call,
        toolName: 'read_log',
        output: { type: 'text', value: output },
        toolMessageId: tm,
        durationMs: 3,
      },
    },
    { type: 'step/end', turn, step: 1, data: { reason: 'tool-calls', usage } },
    { type: 'step/start', turn, step: 2, data: {} },
    assistant(newId(), [{ type: 'text', text: `answer ${turn}` }]),
    { type: 'step/end', turn, step: 2, data: { reason: 'final', usage } },
    { type: 'turn/end', turn, data: { reason: 'completed', steps: 2, usage, cost: 0 } },
  ] as NewEvent[];
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const ms = (t0: bigint) => Number(process.hrtime.bigint() - t0) / 1e6;

async function measure(open: () => Promise<Store>, big: boolean, payloads: LargePayloadOptions) {
  const cold: number[] = [];
  const snap: number[] = [];
  const warm: number[] = [];
  for (let r = 0; r < REPS; r++) {
    const store = await open();
    try {
      const writer = new Sessions({ store, largePayloads: payloads });
      const id = (await writer.create()).id;
      for (let t = 1; t <= TURNS; t++)
        await writer.append(id, turnEvents(t, big && t === 10 ? BIG : `small result ${t}`));
      // A process that kept nothing, no snapshot: the whole path is folded.
      let s = new Sessions({ store, largePayloads: payloads, snapshotEvery: 64 });
      let t0 = process.hrtime.bigint();
      await s.context(id);
      cold.push(ms(t0));
      // Another process: the snapshot the cold read wrote.
      s = new Sessions({ store, largePayloads: payloads, snapshotEvery: 64 });
      t0 = process.hrtime.bigint();
      await s.context(id);
      snap.push(ms(t0));
      // This process again, after one more turn.
      await s.append(id, turnEvents(TURNS + 1, 'small'));
      t0 = process.hrtime.bigint();
      await s.context(id);
      warm.push(ms(t0));
    } finally {
      await store.close();
    }
  }
  return { cold: median(cold), snapshot: median(snap), warm: median(warm) };
}

async function opener(kind: 'sqlite' | 'postgres'): Promise<{ open: () => Promise<Store>; done: () => Promise<void> }> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'keel-bench-payloads-'));
    let n = 0;
    return {
      open: async () => openSqliteStore({ path: join(dir, `k${n++}.db`) }),
      done: async () => rmSync(dir, { recursive: true, force: true }),
    };
  }
  const schemas: string[] = [];
  return {
    open: async () => {
      const schema = `keel_bench_${randomBytes(5).toString('hex')}`;
      schemas.push(schema);
      const s = new PostgresStore({ url: PG_URL, schema, poolSize: 4 });
      await s.opened();
      return s;
    },
    done: async () => {
      const c = new pg.Client({ connectionString: PG_URL });
      await c.connect();
      for (const s of schemas) await c.query(`DROP SCHEMA IF EXISTS "${s}" CASCADE`);
      await c.end();
    },
  };
}

const fmt = (x: { cold: number; snapshot: number; warm: number }) =>
  `cold ${x.cold.toFixed(1).padStart(8)} ms   snapshot ${x.snapshot.toFixed(1).padStart(8)} ms   warm ${x.warm.toFixed(1).padStart(7)} ms`;

console.log(
  `keel large payloads: context read, ${TURNS} turns (${TURNS * 11} events), a ${MB} MB tool result in turn 10 — medians of ${REPS}`,
);
for (const kind of BACKENDS) {
  const { open, done } = await opener(kind);
  try {
    // A first round warms the code up (the JIT, the connections): not counted.
    await measure(open, true, {});
    const without = await measure(open, false, {});
    const truncated = await measure(open, true, {});
    const whole = await measure(open, true, { modelView: 'whole' });
    console.log(`${kind.padEnd(9)} without            ${fmt(without)}`);
    console.log(`${kind.padEnd(9)} ${MB} MB, truncated    ${fmt(truncated)}`);
    console.log(`${kind.padEnd(9)} ${MB} MB, whole        ${fmt(whole)}`);
  } finally {
    await done();
  }
}
