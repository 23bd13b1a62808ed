import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, ScriptedModel, SqliteStore, type Runtime } from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';

/**
 * A worker that is told about new work while it is busy looking for work must not sleep through
 * it until its next poll: a wake-up that comes while it claims is kept for its next nap.
 */
describe('worker wake-ups', () => {
  let rt: Runtime | undefined;
  let store: SqliteStore | undefined;
  afterEach(async () => {
    await rt?.close({ graceMs: 0 });
    await store?.close();
  });

  const agent = () => defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'ok' }], { loop: true }) });

  /** Sends a message while the worker's look for work is held (by `hold`), then lets it go: the run must start at once. */
  async function sentWhileLooking(
    hold: (s: SqliteStore, held: { inLook: () => void; release: Promise<void> }) => void,
  ): Promise<void> {
    store = new SqliteStore({ path: ':memory:' });
    rt = createRuntime({ store, agents: [agent()] });
    const session = await rt.sessions.create();
    const inLook = deferred();
    const release = deferred();
    hold(store, { inLook: () => inLook.resolve(), release: release.promise });
    rt.startWorker({ id: 'W', pollMs: 60_000 });
    await inLook.promise;
    const { run } = await rt.sessions.send(session.id, 'hello');
    release.resolve();
    const started = performance.now();
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    // Well under the 60 s poll: the wake-up during the look was not lost.
    expect(performance.now() - started).toBeLessThan(5_000);
  }

  it('a message sent while the worker reads whether there is work (there is none) is picked up at once, not at the next poll', async () => {
    await sentWhileLooking((s, held) => {
      // The worker's first look reads the counts by status and finds nothing to claim; before
      // it answers, a message is sent (and the worker woken).
      const count = s.runs.countByStatus.bind(s);
      let done = false;
      s.runs.countByStatus = async () => {
        const counts = await count();
        if (!done && counts.queued === 0 && counts.running === 0) {
          done = true;
          held.inLook();
          await held.release;
        }
        return counts;
      };
    });
  });

  it('a message sent while the worker is in the middle of a claim that finds nothing is picked up at once, not at the next poll', async () => {
    await sentWhileLooking((s, held) => {
      // The counts say there may be work (a run queued behind another would); the claim's
      // transaction finds none, and has committed by the time the message is sent: only the
      // worker's answer is held back.
      const count = s.runs.countByStatus.bind(s);
      s.runs.countByStatus = async () => ({ ...(await count()), queued: 1 });
      const transaction = s.transaction.bind(s);
      let done = false;
      s.transaction = (async (fn: Parameters<SqliteStore['transaction']>[0]) => {
        let claimed = false;
        const result = await transaction((tx) =>
          fn({ ...tx, claims: { ...tx.claims, claim: (...a) => ((claimed = true), tx.claims.claim(...a)) } }),
        );
        if (claimed && result === undefined && !done) {
          done = true;
          held.inLook();
          await held.release;
        }
        return result;
      }) as SqliteStore['transaction'];
    });
  });

  it('an idle worker looks for work without write transactions: neither its polls nor the end of a run take the write lock when nothing is claimable', async () => {
    store = new SqliteStore({ path: ':memory:' });
    rt = createRuntime({ store, agents: [agent()] });
    const session = await rt.sessions.create();
    rt.startWorker({ id: 'W', pollMs: 10, sweepMs: 60_000 });
    const { run } = await rt.sessions.send(session.id, 'hello');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    await new Promise((r) => setTimeout(r, 30));
    const commits = store.commitCount;
    // About ten polls, and the look after the run's end.
    await new Promise((r) => setTimeout(r, 120));
    expect(store.commitCount).toBe(commits);
    // Work that comes is still taken.
    const next = await rt.sessions.send(session.id, 'again');
    expect((await rt.runs.wait(next.run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
  });
});
