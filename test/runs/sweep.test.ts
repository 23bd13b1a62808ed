/**
 * The sweep finds what is due through the index on the due time (ADR-0034), however many runs are
 * idle in front of it: a sleep wakes, a wait's deadline applies, a run's own deadline times it out.
 * The idle runs are created older (smaller ids) than the due one, so a sweep that lists idle runs
 * by id never reaches it.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  manualClock,
  newId,
  openSqliteStore,
  ScriptedModel,
  sleepTool,
  tool,
  type Clock,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const HOUR = 3600_000;
const IDLE = 20_000;

const STATUSES = ['sleeping', 'waiting_approval', 'waiting_for_signal', 'waiting_for_user', 'paused'] as const;

/**
 * A store with `n` runs that no worker holds, each in a session of its own, due far in the future
 * (a year away): sleeping, waiting for an approval, a signal or an answer, paused.
 */
async function storeWithIdleRuns(backend: 'sqlite' | 'postgres', n: number, now: number): Promise<Store> {
  const far = now + 365 * 24 * HOUR;
  if (backend === 'postgres') {
    // Written by the server itself, in one statement each (20,000 runs through the port would take minutes).
    const pgs = await openTestPostgres();
    cleanups.push(() => pgs.cleanup());
    const client = new pg.Client({ connectionString: pgs.url });
    await client.connect();
    try {
      await client.query(`SET search_path TO "${pgs.schema}"`);
      await client.query(
        `INSERT INTO sessions (id, tenant, created_at) SELECT '00000000-idle-' || lpad(i::text, 8, '0'), 'default', $1 FROM generate_series(1, $2) AS i`,
        [now, n],
      );
      await client.query(
        `INSERT INTO runs (id, session_id, agent_name, agent_version, agent_spec, status, created_at, deadline_at, waiting)
         SELECT '00000000-idle-' || lpad(i::text, 8, '0'), '00000000-idle-' || lpad(i::text, 8, '0'), 'a', '1', '{}', (ARRAY[${STATUSES.map((x) => `'${x}'`).join(',')}])[1 + i % ${STATUSES.length}], $1, $2::bigint + i,
                CASE WHEN i % ${STATUSES.length} = ${STATUSES.length - 1} THEN NULL ELSE json_build_object('kind', 'sleep', 'calls', '[]'::json, 'decisions', '{}'::json, 'expiresAt', $2::bigint - i)::text END
         FROM generate_series(1, $3) AS i`,
        [now, far, n],
      );
    } finally {
      await client.end();
    }
    return pgs.store;
  }
  const store = openSqliteStore({ path: ':memory:' });
  cleanups.push(() => store.close());
  for (let done = 0; done < n;) {
    const batch = Math.min(2000, n - done);
    await store.transaction(async (tx) => {
      for (let i = 0; i < batch; i++) {
        const s = await tx.sessions.create({ id: newId(), createdAt: now });
        const r = await tx.runs.create({
          id: newId(),
          sessionId: s.id,
          agent: { name: 'a', version: '1' },
          agentSpec: {},
          createdAt: now,
          deadlineAt: far + i,
        });
        const status = STATUSES[(done + i) % STATUSES.length]!;
        const waiting = status === 'paused' ? null : { kind: 'sleep', calls: [], decisions: {}, expiresAt: far - i };
        await tx.runs.update(r.id, { status, waiting });
      }
    });
    done += batch;
  }
  return store;
}

function start(store: Store, agents: ReturnType<typeof defineAgent>[], clock: Clock): Runtime {
  const rt = createRuntime({ store, agents, clock });
  cleanups.push(() => rt.close({ graceMs: 50 }));
  return rt;
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`the sweep behind ${IDLE} idle runs (${backend})`, () => {
    it('a sleep that is due wakes on time, and the run completes', { timeout: 120_000 }, async () => {
      const clock = manualClock();
      const store = await storeWithIdleRuns(backend, IDLE, clock.now());
      const model = new ScriptedModel([
        { toolCalls: [{ id: 'z1', name: 'sleep', input: { seconds: 3600 } }] },
        { text: 'awake' },
      ]);
      const rt = start(store, [defineAgent({ name: 'a', model, tools: [sleepTool()] })], clock);
      rt.startWorker({ pollMs: 10, sweepMs: 10 });
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'go');
      expect((await rt.runs.wait(run.id)).status).toBe('sleeping');
      clock.advance(HOUR);
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
      // Nothing else was due: every idle run is as it was.
      const counts = await rt.runs.countByStatus();
      expect(
        counts.sleeping + counts.waiting_approval + counts.waiting_for_signal + counts.waiting_for_user + counts.paused,
      ).toBe(IDLE);
    });

    it("a wait's deadline and a run's own deadline apply, behind them as well", { timeout: 120_000 }, async () => {
      const clock = manualClock();
      const store = await storeWithIdleRuns(backend, IDLE, clock.now());
      const danger = (name: string, wait?: Parameters<typeof tool>[0]['wait']) =>
        tool({
          name,
          description: 'Needs approval',
          input: z.object({}),
          approval: 'always',
          execute: () => 'done',
          ...(wait ? { wait } : {}),
        });
      const model = new ScriptedModel([
        { toolCalls: [{ id: 'd1', name: 'denied_at_deadline', input: {} }] },
        { toolCalls: [{ id: 'd2', name: 'never_decided', input: {} }] },
        { text: 'ok' },
      ]);
      const agent = defineAgent({
        name: 'a',
        model,
        tools: [
          danger('denied_at_deadline', { timeoutMs: 60_000, onTimeout: { deny: 'late' } }),
          danger('never_decided'),
        ],
      });
      const rt = start(store, [agent], clock);
      rt.startWorker({ pollMs: 10, sweepMs: 10 });
      const a = await rt.sessions.create();
      const first = (await rt.sessions.send(a.id, 'go')).run;
      expect((await rt.runs.wait(first.id)).status).toBe('waiting_approval');
      const b = await rt.sessions.create();
      const second = (await rt.sessions.send(b.id, 'go', { timeoutMs: 2 * 60_000 })).run;
      expect((await rt.runs.wait(second.id)).status).toBe('waiting_approval');
      clock.advance(61_000);
      expect((await rt.runs.wait(first.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
      // The run's deadline is set by the system clock at its creation: well past it.
      clock.advance(10 * 60_000);
      const timedOut = await rt.runs.wait(second.id, { until: 'terminal', timeoutMs: 10_000 });
      expect(timedOut.status).toBe('timed_out');
    });
  });
}
