/**
 * What a run's turn end costs on PostgreSQL, in round trips (ADR-0051): its final step's append,
 * the run's read with its steering, what comes up next and its children, the end's event with the
 * row's update, the next run's claim in one statement, its start's event, and COMMIT with the
 * tenant's charge. Operations that need no answer before the next travel together.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, ScriptedModel, type RunRecord } from '../../src/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { sentDuring, type SentStatement } from '../support/sent-statements.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The transactions in `sent`, each its statements from BEGIN to COMMIT on one connection. */
function transactions(sent: SentStatement[]): SentStatement[][] {
  const open = new Map<number, SentStatement[]>();
  const done: SentStatement[][] = [];
  for (const s of sent) {
    if (s.text.startsWith('BEGIN')) open.set(s.client, []);
    const tx = open.get(s.client);
    if (!tx) continue;
    tx.push(s);
    if (s.text === 'COMMIT' || s.text === 'ROLLBACK') {
      done.push(tx);
      open.delete(s.client);
    }
  }
  return done;
}

/**
 * Round trips of a transaction: each statement sent while nothing before it was unanswered starts
 * one (one sent after an answer, while a later statement was still unanswered, counts with it).
 */
const roundTrips = (tx: SentStatement[]) => tx.filter((s) => !s.pipelined).length;

describe('PostgreSQL: the round trips of a turn end', () => {
  it('a run that ends and claims the next one: at most 5 round trips, the claim one statement', async () => {
    const { store, cleanup } = await openTestPostgres({ poolSize: 4 });
    cleanups.push(cleanup);
    const agent = defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'done' }], { loop: true }) });
    const rt = createRuntime({ store, agents: [agent] });
    cleanups.push(() => rt.close({ graceMs: 50 }));
    const runs: RunRecord[] = [];
    for (let i = 0; i < 2; i++) runs.push((await rt.sessions.send((await rt.sessions.create()).id, `task ${i}`)).run);
    const sent = await sentDuring(async () => {
      rt.startWorker({ id: 'w1', concurrency: 1, pollMs: 60_000 });
      for (const r of runs) expect((await rt.runs.wait(r.id, { timeoutMs: 10_000 })).status).toBe('completed');
    });
    // The first run's end: it moves the run to completed and claims the second.
    const end = transactions(sent).find(
      (tx) =>
        tx.some((s) => s.text.startsWith('UPDATE runs SET usage')) &&
        tx.some((s) => s.text.includes("UPDATE runs SET status = 'running'")),
    );
    expect(end, 'the first run’s end claims the second').toBeDefined();
    expect(roundTrips(end!)).toBeLessThanOrEqual(5);
    // The final step's append is not waited for: what the end reads is sent with it.
    expect(end![1]!.text).toMatch(/keel_append/);
    expect(end!.slice(1, 8).every((s) => s.pipelined)).toBe(true);
    // The tenants to serve are chosen inside the claim's statement, not read beside it.
    expect(end!.filter((s) => /WITH RECURSIVE active/.test(s.text) && !/^WITH claimed/.test(s.text))).toEqual([]);
    expect((await rt.runs.get(runs[1]!.id)).status).toBe('completed');
  });
});
