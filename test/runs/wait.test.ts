import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import { z } from 'zod';
import { createRuntime, defineAgent, ScriptedModel, SqliteStore, tool, type Runtime } from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';

/** runs.wait: the run's record once it gets there, woken by its commits (here or on another node), never by a poll alone. */
describe('runs.wait', () => {
  const cleanups: Array<() => Promise<void> | void> = [];
  afterEach(async () => {
    for (const c of cleanups.splice(0).reverse()) await c();
  });

  const agent = (name = 'a') =>
    defineAgent({
      name,
      model: new ScriptedModel([{ toolCalls: [{ name: 'gate', input: {} }] }, { text: 'done' }], { loop: true }),
      tools: [
        tool({
          name: 'gate',
          description: 'needs approval',
          input: z.object({}),
          approval: 'always',
          execute: () => 'ok',
        }),
      ],
    });

  function runtimeOn(store: SqliteStore): Runtime {
    const rt = createRuntime({ store, agents: [agent()] });
    cleanups.push(() => rt.close({ graceMs: 0 }));
    return rt;
  }

  it('returns at once, without a poll, when the run settles (waiting for approval) and then ends in this process', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    cleanups.push(() => store.close());
    const rt = runtimeOn(store);
    rt.startWorker({ id: 'w', pollMs: 60_000 });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    let t0 = performance.now();
    const settled = await rt.runs.wait(run.id, { pollMs: 60_000, timeoutMs: 20_000 });
    expect(settled.status).toBe('waiting_approval');
    expect(performance.now() - t0).toBeLessThan(10_000);
    const call = (settled.waiting as { calls?: Array<{ toolCallId: string }> } | null)?.calls?.[0]?.toolCallId;
    expect(call).toBeTruthy();
    const ended = rt.runs.wait(run.id, { until: 'terminal', pollMs: 60_000, timeoutMs: 20_000 });
    t0 = performance.now();
    await rt.runs.approve(run.id, call!);
    expect(await ended).toMatchObject({ status: 'completed' });
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it('times out with a timeout StoreError naming the status, and an abort rejects with its reason; neither leaves a listener behind', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    cleanups.push(() => store.close());
    const rt = runtimeOn(store);
    // No worker: the run stays queued.
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    const listeners = () =>
      (rt.sessions.log as unknown as { bus: { live: { listenerCount(k: string): number } } }).bus.live.listenerCount(
        s.id,
      );
    const before = listeners();
    const t0 = performance.now();
    await expect(rt.runs.wait(run.id, { timeoutMs: 150, pollMs: 60_000 })).rejects.toMatchObject({
      code: 'timeout',
      message: `run ${run.id} is still queued after 150 ms`,
    });
    expect(performance.now() - t0).toBeLessThan(5_000);
    const stop = new AbortController();
    const waiting = rt.runs.wait(run.id, { signal: stop.signal, pollMs: 60_000 });
    stop.abort(new Error('no longer needed'));
    await expect(waiting).rejects.toThrow('no longer needed');
    expect(listeners()).toBe(before);
    // Already aborted: refused before it waits.
    await expect(rt.runs.wait(run.id, { signal: AbortSignal.abort(new Error('gone')) })).rejects.toThrow('gone');
  });

  it('is woken by a run ending on another node of the same database, well before its poll', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-wait-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keel.db');
    const a = new SqliteStore({ path });
    const b = new SqliteStore({ path });
    cleanups.push(
      () => a.close(),
      () => b.close(),
    );
    const api = runtimeOn(a);
    const worker = runtimeOn(b);
    const s = await api.sessions.create();
    const { run } = await api.sessions.send(s.id, 'go');
    const settled = api.runs.wait(run.id, { pollMs: 60_000, timeoutMs: 20_000 });
    const t0 = performance.now();
    worker.startWorker({ id: 'w', pollMs: 50 });
    expect(await settled).toMatchObject({ status: 'waiting_approval' });
    // The other node's commits are noticed within ~50 ms (data_version), not at the 60 s poll.
    expect(performance.now() - t0).toBeLessThan(10_000);
  });

  it('returns at once for a run cancelled while its tool ignores the abort', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    cleanups.push(() => store.close());
    let release!: () => void;
    const stuck = new Promise<void>((resolve) => (release = resolve));
    const started = deferred();
    cleanups.push(() => release());
    const rt = createRuntime({
      store,
      agents: [
        defineAgent({
          name: 'a',
          model: new ScriptedModel([{ toolCalls: [{ name: 'hang', input: {} }] }, { text: 'done' }], { loop: true }),
          tools: [
            tool({
              name: 'hang',
              description: 'ignores its abort',
              input: z.object({}),
              idempotent: true,
              execute: async () => (started.resolve(), await stuck, 'late'),
            }),
          ],
        }),
      ],
    });
    cleanups.push(() => rt.close({ graceMs: 0 }));
    rt.startWorker({ id: 'w', pollMs: 50 });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    await started.promise;
    // The worker does not stop within the grace: the run is cancelled without it.
    expect(await rt.runs.cancel(run.id, { graceMs: 100 })).toMatchObject({ status: 'cancelled' });
    const t0 = performance.now();
    expect(await rt.runs.wait(run.id, { until: 'terminal' })).toMatchObject({ status: 'cancelled' });
    expect(performance.now() - t0).toBeLessThan(5_000);
  });

  it('answers with the record its own execution committed with the status it heard: the run as stored, read once', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    cleanups.push(() => store.close());
    const started = deferred<void>();
    const release = deferred<void>();
    const slow = defineAgent({
      name: 'a',
      model: new ScriptedModel([{ toolCalls: [{ name: 'hold', input: {} }] }, { text: 'done' }], { loop: true }),
      tools: [
        tool({
          name: 'hold',
          description: 'holds the run until released',
          input: z.object({}),
          execute: async () => {
            started.resolve();
            await release.promise;
            return 'ok';
          },
        }),
      ],
    });
    const rt = createRuntime({ store, agents: [slow] });
    cleanups.push(() => rt.close({ graceMs: 0 }));
    rt.startWorker({ id: 'w', pollMs: 60_000 });
    const s = await rt.sessions.create();
    const { run } = await rt.sessions.send(s.id, 'go');
    await started.promise;
    const getRun = store.runs.get.bind(store);
    let reads = 0;
    store.runs.get = (id) => {
      reads++;
      return getRun(id);
    };
    const waiting = rt.runs.wait(run.id, { until: 'terminal', pollMs: 60_000, timeoutMs: 20_000 });
    // The wait has read the run (running) before the run goes on.
    await vi.waitFor(() => expect(reads).toBe(1));
    release.resolve();
    const ended = await waiting;
    expect(ended).toMatchObject({ id: run.id, status: 'completed' });
    // The end came with the status event it heard: not read again.
    expect(reads).toBe(1);
    store.runs.get = getRun;
    expect(ended).toEqual(await rt.runs.get(run.id));
  });
});
