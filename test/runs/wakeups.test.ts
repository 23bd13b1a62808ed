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

  it('a message sent while the worker is in the middle of a claim is picked up at once, not at the next poll', async () => {
    store = new SqliteStore({ path: ':memory:' });
    rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'ok' }], { loop: true }) })] });
    const session = await rt.sessions.create();
    // The worker's next claim finds nothing; before it returns, a message is sent (and the worker
    // woken). Its transaction has committed by then: only the worker's answer is held back.
    const inClaim = deferred();
    const release = deferred();
    const transaction = store.transaction.bind(store);
    let held = false;
    store.transaction = (async (fn: Parameters<SqliteStore['transaction']>[0]) => {
      let claimed = false;
      const result = await transaction((tx) => fn(new Proxy(tx, { get: (t, k: keyof typeof tx) => (k === 'claimRun' ? ((claimed = true), t[k]) : t[k]) })));
      if (claimed && result === undefined && !held) {
        held = true;
        inClaim.resolve();
        await release.promise;
      }
      return result;
    }) as SqliteStore['transaction'];
    rt.startWorker({ id: 'W', pollMs: 60_000 });
    await inClaim.promise;
    const { run } = await rt.sessions.send(session.id, 'hello');
    release.resolve();
    const started = performance.now();
    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    // Well under the 60 s poll: the wake-up during the claim was not lost.
    expect(performance.now() - started).toBeLessThan(5_000);
  });
});
