/**
 * Provider flow control (docs/flow-control.md) against a fake provider that enforces a real rate
 * limit (bench/fake-provider.ts): RPS requests per second (a sliding window of one second: a
 * provider's requests per minute scaled down in time) and CONCURRENT requests in flight, answering
 * 429 with retry-after-ms beyond either. RUNS runs (one model call each, LATENCY_MS per answer) are
 * queued at once on a SQLite file, then the runtime's workers (WORKERS × SLOTS) execute them.
 *
 *   limited    the runtime with `limits` equal to the provider's: reports runs failed (by 429 or
 *              otherwise), 429s seen, the peak of calls in flight, the wall time, and the achieved
 *              rate against the allowed one (RUNS ÷ wall seconds ÷ RPS), the waiting time for
 *              limits (mean, p50, p95, max) and the store queries it cost (acquisitions);
 *   unlimited  the same runs without limits (only the model call's own retries, honouring
 *              retry-after per run): what flow control saves. Skip it with UNLIMITED=0.
 *
 * Env: RUNS (500), RPS (20), CONCURRENT (4), LATENCY_MS (50), WORKERS (2), SLOTS (16).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createRuntime, defineAgent, openSqliteStore, type RunRecord } from '../src/index.ts';
import { FakeProvider } from './fake-provider.ts';

const RUNS = Number(process.env.RUNS ?? 500);
const RPS = Number(process.env.RPS ?? 20);
const CONCURRENT = Number(process.env.CONCURRENT ?? 4);
const LATENCY_MS = Number(process.env.LATENCY_MS ?? 50);
const WORKERS = Number(process.env.WORKERS ?? 2);
const SLOTS = Number(process.env.SLOTS ?? 16);

const pct = (xs: number[], p: number) => {
  if (xs.length === 0) return 0;
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor((p / 100) * s.length))]!;
};

async function variant(name: 'limited' | 'unlimited') {
  const dir = mkdtempSync(join(tmpdir(), 'keel-bench-flow-'));
  const store = openSqliteStore({ path: join(dir, 'keel.db') });
  const provider = new FakeProvider({ requests: RPS, windowMs: 1000, concurrency: CONCURRENT, latencyMs: LATENCY_MS });
  let acquisitions = 0;
  const acquire = store.limits.acquire;
  store.limits.acquire = (...a) => (acquisitions++, acquire(...a));
  const counted = store;
  const rt = createRuntime({
    store: counted,
    agents: [defineAgent({ name: 'a', model: provider })],
    ...(name === 'limited'
      ? { limits: { 'fake:limited-1': { concurrency: CONCURRENT, requestsPerMinute: RPS, windowMs: 1000 } } }
      : {}),
  });
  const waits: number[] = [];
  rt.flowControl?.observe({ waited: (_k, s) => waits.push(s * 1000) });
  const runs: RunRecord[] = [];
  for (let i = 0; i < RUNS; i++) {
    const s = await rt.sessions.create();
    runs.push((await rt.sessions.send(s.id, `task ${i}`)).run);
  }
  const t0 = performance.now();
  for (let w = 0; w < WORKERS; w++) rt.startWorker({ concurrency: SLOTS, pollMs: 20 });
  const ended = await Promise.all(runs.map((r) => rt.runs.wait(r.id, { until: 'terminal', timeoutMs: 600_000 })));
  const wallS = (performance.now() - t0) / 1000;
  await rt.close({ graceMs: 1000 });
  await store.close();
  rmSync(dir, { recursive: true, force: true });
  const failed = ended.filter((r) => r.status !== 'completed');
  const failedBy429 = failed.filter(
    (r) =>
      JSON.stringify(r.error ?? {}).includes('429') ||
      JSON.stringify(r.error ?? {})
        .toLowerCase()
        .includes('rate limit'),
  );
  return {
    name,
    runs: RUNS,
    completed: ended.length - failed.length,
    failed: failed.length,
    failedBy429: failedBy429.length,
    seen429: provider.rejected,
    providerCalls: provider.calls,
    maxInFlight: provider.maxInFlight,
    wallS: Number(wallS.toFixed(2)),
    achievedPerS: Number(((ended.length - failed.length) / wallS).toFixed(2)),
    allowedPerS: RPS,
    achievedOverAllowed: Number(((ended.length - failed.length) / wallS / RPS).toFixed(3)),
    ...(name === 'limited'
      ? {
          waitMs: {
            mean: Math.round(waits.reduce((a, b) => a + b, 0) / Math.max(1, waits.length)),
            p50: Math.round(pct(waits, 50)),
            p95: Math.round(pct(waits, 95)),
            max: Math.round(Math.max(0, ...waits)),
          },
          acquisitionsPerCall: Number((acquisitions / Math.max(1, provider.served)).toFixed(2)),
        }
      : {}),
  };
}

console.log(
  `flow control: ${RUNS} runs, provider ${RPS} req/s (sliding 1 s), ${CONCURRENT} concurrent, ${LATENCY_MS} ms per answer; ${WORKERS} workers × ${SLOTS} slots, SQLite file`,
);
console.log(JSON.stringify(await variant('limited'), null, 2));
if (process.env.UNLIMITED !== '0') console.log(JSON.stringify(await variant('unlimited'), null, 2));
