/**
 * What a worker's sweep costs as idle runs pile up (ADR-0034). A sweep finds the runs no worker
 * holds whose wait or deadline is due (a sleep's wake-up, a wait's deadline, a run's timeout).
 * For each backend and each count of idle runs (IDLE, default 1,000, 10,000 and 100,000: sleeping,
 * waiting for approvals, signals and answers, paused, all due a year from now):
 *
 *   read, nothing due   a sweep's read when nothing is due (what every worker does every second):
 *                       `dueRuns`, from the index on the due time; median of REPS;
 *   read, one due       the same with one run due among them;
 *   list (before)       what a sweep read before: the idle runs by id, 10,000 at most
 *                       (`listRuns`), which stopped seeing runs past the 10,000th;
 *   wake-up             the whole path: a sleeping run of a real runtime (worker sweeping every
 *                       SWEEP_MS) is due; the time from the clock passing its wake-up to its run
 *                       completed, median of WAKES, against the same with no idle runs (the floor).
 *
 * Env: IDLE (1000,10000,100000), REPS (200), WAKES (5), SWEEP_MS (20), BACKENDS (sqlite,postgres),
 * KEEL_BENCH_DATABASE_URL (else the machine's server on 127.0.0.1:5432, database test).
 */
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { cpus, tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import pg from 'pg';
import {
  createRuntime,
  defineAgent,
  manualClock,
  openSqliteStore,
  ScriptedModel,
  sleepTool,
  type Store,
} from '../src/index.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';

const IDLE = (process.env.IDLE ?? '1000,10000,100000').split(',').map(Number);
const REPS = Number(process.env.REPS ?? 200);
const WAKES = Number(process.env.WAKES ?? 5);
const SWEEP_MS = Number(process.env.SWEEP_MS ?? 20);
const BACKENDS = (process.env.BACKENDS ?? 'sqlite,postgres').split(',') as Array<'sqlite' | 'postgres'>;
const PG_URL = process.env.KEEL_BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/test';
const HOUR = 3600_000;
const IDLE_STATUSES = ['sleeping', 'waiting_approval', 'waiting_for_signal', 'waiting_for_user', 'paused'] as const;

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;
const fmt = (n: number, d = 0) => n.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d });

type Place = { kind: 'sqlite'; path: string } | { kind: 'postgres'; schema: string };

function open(place: Place): Promise<Store> | Store {
  if (place.kind === 'sqlite') return openSqliteStore({ path: place.path });
  const s = new PostgresStore({ url: PG_URL, schema: place.schema, poolSize: 4 });
  return s.opened().then(() => s);
}

/** `n` idle runs, each in a session of its own, written by the database itself (the schema exists). */
async function addIdleRuns(place: Place, n: number, now: number): Promise<void> {
  const far = now + 365 * 24 * HOUR;
  const statuses = `(${IDLE_STATUSES.map((s) => `'${s}'`).join(',')})`;
  if (place.kind === 'sqlite') {
    const db = new Database(place.path);
    db.pragma('busy_timeout = 10000');
    db.transaction(() => {
      const session = db.prepare("INSERT INTO sessions (id, tenant, created_at) VALUES (?, 'default', ?)");
      const run = db.prepare(
        "INSERT INTO runs (id, session_id, agent_name, agent_version, agent_spec, status, created_at, deadline_at, waiting) VALUES (?, ?, 'a', '1', '{}', ?, ?, ?, ?)",
      );
      for (let i = 0; i < n; i++) {
        const id = `00000000-idle-${String(i).padStart(8, '0')}`;
        session.run(id, now);
        const status = IDLE_STATUSES[i % IDLE_STATUSES.length]!;
        run.run(
          id,
          id,
          status,
          now,
          far + i,
          status === 'paused' ? null : JSON.stringify({ kind: 'sleep', calls: [], decisions: {}, expiresAt: far - i }),
        );
      }
    })();
    db.close();
    return;
  }
  const c = new pg.Client({ connectionString: PG_URL });
  await c.connect();
  await c.query(`SET search_path TO "${place.schema}"`);
  await c.query(
    `INSERT INTO sessions (id, tenant, created_at) SELECT '00000000-idle-' || lpad(i::text, 8, '0'), 'default', $1 FROM generate_series(1, $2) AS i`,
    [now, n],
  );
  await c.query(
    `INSERT INTO runs (id, session_id, agent_name, agent_version, agent_spec, status, created_at, deadline_at, waiting)
     SELECT '00000000-idle-' || lpad(i::text, 8, '0'), '00000000-idle-' || lpad(i::text, 8, '0'), 'a', '1', '{}', (ARRAY${statuses.replace('(', '[').replace(')', ']')})[1 + i % ${IDLE_STATUSES.length}], $1, $2::bigint + i,
            CASE WHEN i % ${IDLE_STATUSES.length} = ${IDLE_STATUSES.length - 1} THEN NULL ELSE json_build_object('kind', 'sleep', 'calls', '[]'::json, 'decisions', '{}'::json, 'expiresAt', $2::bigint - i)::text END
     FROM generate_series(1, $3) AS i`,
    [now, far, n],
  );
  await c.query('ANALYZE runs');
  await c.end();
}

async function timeUs(reps: number, fn: () => Promise<unknown>): Promise<number> {
  const xs: number[] = [];
  for (let i = 0; i < reps; i++) {
    const t0 = performance.now();
    await fn();
    xs.push((performance.now() - t0) * 1000);
  }
  return median(xs);
}

/** The wake-up latency of a sleeping run on a runtime over this place (median of WAKES), in ms. */
async function wakeUps(place: Place): Promise<number> {
  const store = await open(place);
  const clock = manualClock();
  const script = Array.from({ length: WAKES }, () => [
    { toolCalls: [{ id: 'z', name: 'sleep', input: { seconds: 3600 } }] },
    { text: 'awake' },
  ]).flat();
  const rt = createRuntime({
    store,
    agents: [defineAgent({ name: 'a', model: new ScriptedModel(script), tools: [sleepTool()] })],
    clock,
  });
  rt.startWorker({ pollMs: 10, sweepMs: SWEEP_MS });
  const ms: number[] = [];
  for (let i = 0; i < WAKES; i++) {
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    await rt.runs.wait(run.id);
    const t0 = performance.now();
    clock.advance(HOUR);
    await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 60_000 });
    ms.push(performance.now() - t0);
  }
  await rt.close({ graceMs: 100 });
  await store.close();
  return median(ms);
}

async function withPlace<T>(kind: 'sqlite' | 'postgres', fn: (place: Place) => Promise<T>): Promise<T> {
  if (kind === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'keel-bench-sweep-'));
    try {
      return await fn({ kind, path: join(dir, 'keel.db') });
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }
  const schema = `keel_bench_${randomBytes(4).toString('hex')}`;
  try {
    return await fn({ kind, schema });
  } finally {
    const c = new pg.Client({ connectionString: PG_URL });
    await c.connect();
    await c.query(`DROP SCHEMA IF EXISTS "${schema}" CASCADE`);
    await c.end();
  }
}

console.log(
  `keel sweep benchmark — node ${process.version}, ${cpus().length} CPUs; medians of ${REPS} reads, ${WAKES} wake-ups (worker sweeping every ${SWEEP_MS} ms)`,
);
for (const backend of BACKENDS) {
  const floor = await withPlace(backend, async (place) => {
    (await open(place)).close();
    return wakeUps(place);
  });
  console.log(`  ${backend}: wake-up with no idle runs (the floor) ${fmt(floor, 1)} ms`);
  for (const idle of IDLE) {
    await withPlace(backend, async (place) => {
      const now = Date.now();
      await (await open(place)).close();
      await addIdleRuns(place, idle, now);
      const store = await open(place);
      const nothing = await timeUs(REPS, () => store.claims.due(now, { limit: 200 }));
      const before = await timeUs(Math.max(3, Math.floor(REPS / 20)), () =>
        store.runs.list({ statuses: ['queued', 'paused', ...IDLE_STATUSES], limit: 10_000 }),
      );
      // One run due among them: the one with the earliest wake-up, moved to now.
      const [first] = await store.runs.list({ statuses: ['sleeping'], limit: 1 });
      await store.runs.update(first!.id, { waiting: { kind: 'sleep', calls: [], decisions: {}, expiresAt: now - 1 } });
      const one = await timeUs(REPS, () => store.claims.due(now, { limit: 200 }));
      const found = (await store.claims.due(now, { limit: 200 })).length;
      await store.runs.update(first!.id, { status: 'completed', waiting: null });
      await store.close();
      const wake = await wakeUps(place);
      console.log(
        `    ${fmt(idle).padStart(7)} idle: read, nothing due ${fmt(nothing, 0).padStart(5)} µs; one due ${fmt(one, 0).padStart(5)} µs (found ${found}); list (before) ${fmt(before / 1000, 1).padStart(7)} ms; wake-up ${fmt(wake, 1)} ms (${fmt(wake / floor, 2)}× the floor)`,
      );
    });
  }
}
