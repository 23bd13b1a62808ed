/**
 * Session store figures on embedded SQLite (durable commits: WAL + synchronous=FULL):
 * - durable append throughput, one event per commit, for one session and across 100 sessions;
 * - model-context read time for sessions of 1k, 10k and 100k events, cold (no snapshot), from the
 *   snapshot (a process that kept nothing) and warm (the state this process kept), each with a
 *   short tail, with and without periodic compaction;
 * - memory to open a 100k-event session and read its context.
 * Run with `npm run bench:store` (node --expose-gc).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { contentHash, newId, openSqliteStore, Sessions, type NewEvent } from '../src/index.ts';

const child = process.argv[2] === '--open';
const dir = child ? '' : mkdtempSync(join(tmpdir(), 'keel-bench-store-'));
const gc = (globalThis as { gc?: () => void }).gc ?? (() => {});
const usage = { inputTokens: 1200, outputTokens: 80, cachedInputTokens: 0, reasoningTokens: 0 };
const SYSTEM = 'You are a careful assistant. '.repeat(40);
const TOOLS = [
  {
    name: 'lookup',
    description: 'Looks something up',
    inputSchema: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] },
  },
];

const SYSTEM_HASH = contentHash(JSON.stringify(SYSTEM));
const TOOLS_HASH = contentHash(JSON.stringify(TOOLS));
const CONTENT = [
  { hash: SYSTEM_HASH, data: JSON.stringify(SYSTEM) },
  { hash: TOOLS_HASH, data: JSON.stringify(TOOLS) },
];

/** The events of one realistic turn: a user message, a tool step and a final step (13 events). */
function turnEvents(turn: number): NewEvent[] {
  const user = newId();
  const a1 = newId();
  const toolMsg = newId();
  const a2 = newId();
  const call = `call_${turn}`;
  const header = (step: number, messageId: string) =>
    ({
      type: 'request/header',
      turn,
      step,
      data: {
        provider: 'bench',
        modelId: 'bench-1',
        attempt: 1,
        messageId,
        settings: {},
        system: SYSTEM_HASH,
        tools: TOOLS_HASH,
        context: { messages: 0, first: null, last: null },
        promptHash: 'x',
      },
      blobs: CONTENT,
    }) as NewEvent;
  return [
    {
      type: 'turn/start',
      turn,
      data: {
        agent: { name: 'bench', version: '1' },
        model: { provider: 'bench', modelId: 'bench-1' },
        resumed: false,
      },
    },
    {
      type: 'user/message',
      turn,
      data: {
        message: {
          id: user,
          role: 'user',
          content: [{ type: 'text', text: `Question number ${turn}: what is the status of item ${turn}?` }],
        },
        via: 'input',
      },
    },
    { type: 'step/start', turn, step: 1, data: {} },
    header(1, a1),
    {
      type: 'assistant/message',
      turn,
      step: 1,
      data: {
        message: {
          id: a1,
          role: 'assistant',
          content: [
            { type: 'text', text: 'Let me look.' },
            { type: 'tool-call', toolCallId: call, toolName: 'lookup', input: { q: `item ${turn}` } },
          ],
        },
        finishReason: 'tool-calls',
        usage,
        cost: 0,
        timing: { startedAt: 0, durationMs: 1 },
      },
    },
    {
      type: 'tool/call',
      turn,
      step: 1,
      data: {
        toolCallId: call,
        toolName: 'lookup',
        input: { q: `item ${turn}` },
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
        toolName: 'lookup',
        output: { type: 'json', value: { item: turn, status: 'ok', notes: 'all good' } },
        toolMessageId: toolMsg,
        durationMs: 1,
      },
    },
    { type: 'step/end', turn, step: 1, data: { reason: 'tool-calls', usage } },
    { type: 'step/start', turn, step: 2, data: {} },
    header(2, a2),
    {
      type: 'assistant/message',
      turn,
      step: 2,
      data: {
        message: { id: a2, role: 'assistant', content: [{ type: 'text', text: `Item ${turn} is fine.` }] },
        finishReason: 'stop',
        usage,
        cost: 0,
        timing: { startedAt: 0, durationMs: 1 },
      },
    },
    { type: 'step/end', turn, step: 2, data: { reason: 'final', usage } },
    { type: 'turn/end', turn, data: { reason: 'completed', steps: 2, usage, cost: 0 } },
  ];
}

const fmt = (n: number) => Math.round(n).toLocaleString('en-US');

async function appendThroughput(): Promise<void> {
  const store = openSqliteStore({ path: join(dir, 'append.db') });
  const sessions = new Sessions({ store });
  const events = turnEvents(1);

  const one = await sessions.create();
  const N = 2000;
  let t0 = performance.now();
  for (let i = 0; i < N; i++) await sessions.append(one.id, [events[i % events.length]!]);
  const single = N / ((performance.now() - t0) / 1000);

  const many = await Promise.all(Array.from({ length: 100 }, () => sessions.create()));
  t0 = performance.now();
  await Promise.all(
    many.map(async (s) => {
      for (let i = 0; i < 20; i++) await sessions.append(s.id, [events[i % events.length]!]);
    }),
  );
  const spread = 2000 / ((performance.now() - t0) / 1000);

  t0 = performance.now();
  for (let i = 0; i < 200; i++) await sessions.append(one.id, events);
  const batched = (200 * events.length) / ((performance.now() - t0) / 1000);
  await store.close();

  console.log('durable append (each append awaited until committed, synchronous=FULL):');
  console.log(`  one session, one event at a time        : ${fmt(single)} events/s`);
  console.log(`  100 sessions at once (group commit)     : ${fmt(spread)} events/s`);
  console.log(`  one session, a turn (13 events) per call: ${fmt(batched)} events/s`);
}

async function buildSession(
  sessions: Sessions,
  events: number,
  compactEveryTurns: number | undefined,
): Promise<string> {
  const s = await sessions.create();
  const turns = Math.ceil(events / 13);
  let batch: NewEvent[] = [];
  for (let t = 1; t <= turns; t++) {
    batch.push(...turnEvents(t));
    if (compactEveryTurns && t % compactEveryTurns === 0) {
      // Keep the last turn verbatim, as a compaction with a small keep budget would.
      const keep = batch.find((e) => e.type === 'user/message' && e.turn === t)!;
      const kept = await sessions.append(s.id, batch);
      batch = [];
      const firstKept = kept.find((e) => e.type === 'user/message' && e.turn === keep.turn)!;
      await sessions.append(s.id, [
        {
          type: 'compaction',
          data: {
            summary: `Summary up to turn ${t}: every item so far is fine.`,
            firstKeptEntryId: firstKept.id,
            tokensBefore: 100_000,
            tokensAfter: 2000,
            estimated: false,
            model: { provider: 'bench', modelId: 'bench-1' },
            usage,
            cost: 0,
            reason: 'threshold',
          },
        },
      ]);
    }
    if (batch.length >= 1300) {
      await sessions.append(s.id, batch);
      batch = [];
    }
  }
  if (batch.length) await sessions.append(s.id, batch);
  return s.id;
}

async function timed<T>(fn: () => Promise<T>): Promise<{ ms: number; value: T }> {
  const t0 = performance.now();
  const value = await fn();
  return { ms: performance.now() - t0, value };
}

async function contextReads(): Promise<void> {
  console.log(
    'model-context read (ms; cold = no snapshot; snapshot = a process that kept nothing: the stored snapshot + a 13-event tail;',
  );
  console.log('                    warm = the state this process kept in memory + the same tail):');
  for (const compactEvery of [200, undefined]) {
    const label = compactEvery ? `compaction every ${compactEvery} turns` : 'never compacted';
    for (const size of [1_000, 10_000, 100_000]) {
      const path = join(dir, `ctx-${size}-${compactEvery ?? 0}.db`);
      const build = openSqliteStore({ path, synchronous: 'OFF' });
      const id = await buildSession(new Sessions({ store: build }), size, compactEvery);
      await build.close();

      const store = openSqliteStore({ path });
      const sessions = new Sessions({ store });
      const cold = await timed(() => sessions.context(id));
      await sessions.append(
        id,
        turnEvents(999_999).map((e) => ({ ...e, turn: 999_999 }) as NewEvent),
      );
      const fromSnapshot = await timed(() => new Sessions({ store }).context(id));
      const warm = await timed(() => sessions.context(id));
      const stats = await sessions.get(id);
      console.log(
        `  ${label.padEnd(28)} ${fmt(stats.lastSeq).padStart(7)} events: cold ${cold.ms.toFixed(1).padStart(7)}, snapshot ${fromSnapshot.ms.toFixed(1).padStart(6)}, warm ${warm.ms.toFixed(1).padStart(6)}  (${warm.value.messages.length} messages in context)`,
      );
      await store.close();
    }
  }
}

/** Measured in a fresh process, so nothing the benchmark did before is counted. */
async function openMemory(): Promise<void> {
  const path = join(dir, 'ctx-100000-200.db');
  const { execFileSync } = await import('node:child_process');
  const out = execFileSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), '--open', path], {
    encoding: 'utf8',
  });
  console.log(out.trim());
}

async function openAndRead(path: string): Promise<void> {
  gc();
  const before = process.memoryUsage();
  const store = openSqliteStore({ path });
  const sessions = new Sessions({ store });
  const [s] = await sessions.list({ limit: 1 });
  const ctx = await sessions.context(s!.id);
  gc();
  const after = process.memoryUsage();
  const mib = (n: number) => (n / 2 ** 20).toFixed(1);
  console.log(
    `memory to open a ${fmt((await sessions.get(s!.id)).lastSeq)}-event session and read its context (${ctx.messages.length} messages): ` +
      `RSS ${mib(before.rss)} → ${mib(after.rss)} MiB (+${mib(after.rss - before.rss)}), heap +${mib(Math.max(0, after.heapUsed - before.heapUsed))} MiB`,
  );
  await store.close();
}

if (child) {
  await openAndRead(process.argv[3]!);
  process.exit(0);
}

try {
  console.log(`keel store benchmark, SQLite, node ${process.version}`);
  await appendThroughput();
  await contextReads();
  await openMemory();
} finally {
  rmSync(dir, { recursive: true, force: true });
}
