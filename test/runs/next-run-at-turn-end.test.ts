/**
 * A run's turn end hands its worker slot to the next run (ADR-0050): the next claimable run is
 * claimed in the end's own transaction and starts when that commits, with no claim transaction,
 * wake-up or look for work of its own. On PostgreSQL that claim waits for no lock: a run whose
 * session another transaction holds is left for later, and the end commits at once.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createRuntime,
  defineAgent,
  ScriptedModel,
  type AgentDefinition,
  type RunRecord,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { gated } from '../support/runs-helpers.ts';
import { allEvents } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const answering: AgentDefinition = defineAgent({
  name: 'a',
  model: new ScriptedModel([{ text: 'done' }], { loop: true }),
});

function runtimeOn(store: Store): Runtime {
  const rt = createRuntime({ store, agents: [answering] });
  cleanups.push(() => rt.close({ graceMs: 50 }));
  return rt;
}

/** Counts the transactions `store` opens from now on. */
function countTransactions(store: Store): { readonly count: number } {
  const counter = { count: 0 };
  const open = store.transaction.bind(store);
  store.transaction = (fn) => {
    counter.count++;
    return open(fn);
  };
  return counter;
}

/** The reason of the run's move to running (who claimed it). */
async function claimedBy(rt: Runtime, run: RunRecord): Promise<string | undefined> {
  const events = await allEvents(rt.sessions, run.sessionId);
  const started = events.find(
    (e) => e.type === 'run/status' && e.runId === run.id && (e.data as { to: string }).to === 'running',
  );
  return (started?.data as { reason?: string } | undefined)?.reason;
}

describe.each(['sqlite', 'postgres'] as const)(
  'the next run starts in the turn end of the one before (%s)',
  (backend) => {
    it('five queued runs at concurrency 1: one claim transaction, then each end claims the next', async () => {
      const { store, close } = await openBackendStore(backend);
      cleanups.push(close);
      const rt = runtimeOn(store);
      const runs: RunRecord[] = [];
      for (let i = 0; i < 5; i++) runs.push((await rt.sessions.send((await rt.sessions.create()).id, `task ${i}`)).run);
      expect(runs.every((r) => r.status === 'queued')).toBe(true);
      const transactions = countTransactions(store);
      rt.startWorker({ id: 'w1', concurrency: 1, pollMs: 60_000 });
      for (const r of runs) expect((await rt.runs.wait(r.id, { timeoutMs: 10_000 })).status).toBe('completed');
      // The first claim is the worker's own; each run's end claims the next (the last one's finds none).
      expect(transactions.count).toBe(1 + runs.length);
      for (const r of runs) expect(await claimedBy(rt, r)).toBe('claimed by w1');
      // One at a time: each run started after the one before it ended.
      const done = await Promise.all(runs.map((r) => rt.runs.get(r.id)));
      for (let i = 1; i < done.length; i++) expect(done[i]!.startedAt!).toBeGreaterThanOrEqual(done[i - 1]!.endedAt!);
    });

    it('a stopping worker hands nothing over: the run it releases goes back, the next stays queued', async () => {
      const { store, close } = await openBackendStore(backend);
      cleanups.push(close);
      const slow = gated('slow');
      const rt = createRuntime({
        store,
        agents: [
          defineAgent({
            name: 'a',
            model: new ScriptedModel(
              [
                (call) =>
                  call.prompt.some((m) => m.role === 'tool')
                    ? { text: 'done' }
                    : { toolCalls: [{ name: 'slow', input: {} }] },
              ],
              { loop: true },
            ),
            tools: [slow.tool],
          }),
        ],
      });
      cleanups.push(() => rt.close({ graceMs: 50 }));
      const first = (await rt.sessions.send((await rt.sessions.create()).id, 'one')).run;
      const second = (await rt.sessions.send((await rt.sessions.create()).id, 'two')).run;
      const worker = rt.startWorker({ id: 'w1', concurrency: 1, pollMs: 60_000 });
      await slow.started.promise;
      // Stopping: the run in its tool is handed back at its next step boundary, which ends its turn.
      const stopped = worker.stop({ graceMs: 5000 });
      slow.gate.resolve('ok');
      await stopped;
      const [a, b] = await Promise.all([rt.runs.get(first.id), rt.runs.get(second.id)]);
      expect(a.status).toBe('queued');
      expect(b.status).toBe('queued');
      expect(b.lease).toBeNull();
      expect(b.attempt).toBe(0);
    });

    it('an idle worker: runs claimed at their send end without a claim of their own (nothing was claimable)', async () => {
      const { store, close } = await openBackendStore(backend);
      cleanups.push(close);
      const rt = runtimeOn(store);
      const worker = rt.startWorker({ id: 'w1', concurrency: 1, pollMs: 60_000 });
      // Its first look finds nothing to claim.
      await new Promise((r) => setTimeout(r, 100));
      let claimsInTransactions = 0;
      const open = store.transaction.bind(store);
      store.transaction = (fn) =>
        open((tx) =>
          fn({
            ...tx,
            claims: {
              ...tx.claims,
              claim: (...args: Parameters<typeof tx.claims.claim>) => {
                claimsInTransactions++;
                return tx.claims.claim(...args);
              },
            },
          } as typeof tx),
        );
      for (let i = 0; i < 3; i++) {
        const { run } = await rt.sessions.send((await rt.sessions.create()).id, `task ${i}`);
        expect(run.status).toBe('running');
        expect((await rt.runs.wait(run.id, { timeoutMs: 5000 })).status).toBe('completed');
      }
      // One claim a run, in its message's transaction; none in the runs' ends.
      expect(claimsInTransactions).toBe(3);
      expect(worker.active).toBe(0);
    });
  },
);

describe('PostgreSQL: the claim in a turn end waits for no lock', () => {
  it('skips a run whose session another transaction holds: the end commits at once, the skipped run comes after', async () => {
    const { store, url, schema, cleanup } = await openTestPostgres({ poolSize: 6 });
    cleanups.push(cleanup);
    const rt = runtimeOn(store);
    const sessions = [await rt.sessions.create(), await rt.sessions.create(), await rt.sessions.create()];
    const runs: RunRecord[] = [];
    for (const [i, s] of sessions.entries()) runs.push((await rt.sessions.send(s.id, `task ${i}`)).run);
    // Another transaction holds the second run's session.
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    cleanups.push(() => holder.end());
    await holder.query('BEGIN');
    await holder.query(`SELECT 1 FROM "${schema}".sessions WHERE id = $1 FOR UPDATE`, [sessions[1]!.id]);
    rt.startWorker({ id: 'w1', concurrency: 1, pollMs: 60_000 });
    // The first run's end claims the third: its session is free.
    expect((await rt.runs.wait(runs[0]!.id, { timeoutMs: 5000 })).status).toBe('completed');
    expect((await rt.runs.wait(runs[2]!.id, { timeoutMs: 5000 })).status).toBe('completed');
    const skipped = await rt.runs.get(runs[1]!.id);
    expect(skipped.lease).toBeNull();
    // Let go of the session: the worker takes the run it skipped.
    await holder.query('COMMIT');
    expect((await rt.runs.wait(runs[1]!.id, { timeoutMs: 5000 })).status).toBe('completed');
    const ended = await Promise.all(runs.map((r) => rt.runs.get(r.id)));
    expect(ended[2]!.startedAt!).toBeLessThanOrEqual(ended[1]!.startedAt!);
  });
});
