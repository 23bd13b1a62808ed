/**
 * PostgreSQL's commit queue (ADR-0045): appends made at once outside transactions commit together
 * in one call, and each is refused or kept on its own, as if it had been made alone.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { FencedError, NotFoundError, SeqConflictError, StoreError } from '../../src/store/index.ts';
import type { PostgresStore } from '../../src/store/postgres/index.ts';
import { openTestPostgres } from '../support/postgres.ts';

const T0 = 1_700_000_000_000;
const note = (n: number, o: { id?: string; entry?: boolean } = {}) => ({
  id: o.id ?? randomUUID(),
  type: 'test/note',
  v: 1,
  time: T0,
  entry: o.entry ?? false,
  data: { n },
});

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0)) await c();
});

async function open(): Promise<PostgresStore> {
  const { store, cleanup } = await openTestPostgres({ poolSize: 4 });
  cleanups.push(cleanup);
  return store;
}

describe('postgres commit queue', () => {
  it('commits many runs’ appends in a few calls; a stale fence, an unknown session, a seq conflict and a NUL are refused alone', async () => {
    const store = await open();
    const sessions = Array.from({ length: 60 }, (_, i) => `s${i}`);
    for (const id of sessions) await store.sessions.create({ id, createdAt: T0 });
    const run = await store.runs.create({
      id: 'r1',
      sessionId: 's0',
      agent: { name: 'a', version: '1' },
      agentSpec: {},
      createdAt: T0,
    });
    const commits: number[] = [];
    const off = store.observeCommits((s) => commits.push(s));
    const good = sessions.slice(1).map((id, i) => store.events.append(id, [note(i), note(i + 1000)]));
    const stale = store.events.append('s0', [note(1)], { fence: { runId: run.id, token: run.fencingToken + 1 } });
    const fenced = store.events.append('s0', [note(2)], { fence: { runId: run.id, token: run.fencingToken } });
    const unknown = store.events.append('nope', [note(3)]);
    const conflict = store.events.append('s1', [note(4)], { expectLastSeq: 7 });
    const nul = store.events.append('s2', [note(5, { id: 'a\u0000b' })]);
    const appended = await Promise.all(good);
    off();
    expect(appended.map((events) => events.map((e) => e.seq))).toEqual(sessions.slice(1).map(() => [1, 2]));
    await expect(stale).rejects.toBeInstanceOf(FencedError);
    expect((await fenced).map((e) => e.seq)).toEqual([1]);
    await expect(unknown).rejects.toBeInstanceOf(NotFoundError);
    await expect(conflict).rejects.toBeInstanceOf(SeqConflictError);
    await expect(nul).rejects.toMatchObject({ code: 'validation' });
    expect(await nul.catch((e: unknown) => e)).toBeInstanceOf(StoreError);
    // Group commit: far fewer calls than appends.
    expect(commits.length).toBeLessThan(good.length / 2);
    // Every log holds exactly what its appends were told.
    // (s1's conflict and s2's NUL wrote nothing.)
    for (const [i, id] of sessions.slice(1).entries()) {
      const events = await store.events.read(id);
      expect(events.map((e) => [e.seq, (e.data as { n: number }).n])).toEqual(
        id === 's2'
          ? [
              [1, i],
              [2, i + 1000],
            ]
          : [
              [1, i],
              [2, i + 1000],
            ],
      );
    }
    expect((await store.events.read('s0')).map((e) => e.seq)).toEqual([1]);
  });

  it('an append’s blobs are put with it, in the same call', async () => {
    const store = await open();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const hash = 'a'.repeat(64);
    await store.events.append('s', [{ ...note(1), data: { ref: { $blob: hash } } }], {
      blobs: [{ hash, data: 'x'.repeat(100_000) }],
    });
    expect((await store.events.getBlobs([hash])).get(hash)).toHaveLength(100_000);
  });

  it('an entry appended twice in one batch is refused for the second append only', async () => {
    const store = await open();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const id = randomUUID();
    const [first, second] = await Promise.allSettled([
      store.events.append('s', [note(1, { id, entry: true })]),
      store.events.append('s', [note(2, { id, entry: true })]),
    ]);
    expect(first.status).toBe('fulfilled');
    expect(second).toMatchObject({ status: 'rejected', reason: { code: 'conflict' } });
    expect((await store.events.read('s')).map((e) => (e.data as { n: number }).n)).toEqual([1]);
  });

  it('an append to a session another transaction holds does not hold up the other appends of its call', async () => {
    const store = await open();
    await store.sessions.create({ id: 'held', createdAt: T0 });
    await store.sessions.create({ id: 'free', createdAt: T0 });
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    let holding!: () => void;
    const held = new Promise<void>((r) => (holding = r));
    const transaction = store.transaction(async (tx) => {
      await tx.events.append('held', [note(1)]);
      holding();
      await gate;
    });
    await held;
    const waiting = store.events.append('held', [note(2)]);
    // It waits for the lock in a call of its own: the queue's next calls go on meanwhile.
    await new Promise((r) => setTimeout(r, 50));
    const other = await store.events.append('free', [note(3)]);
    expect(other.map((e) => e.seq)).toEqual([1]);
    let done = false;
    void waiting.then(() => (done = true));
    await new Promise((r) => setTimeout(r, 100));
    expect(done).toBe(false);
    release();
    await transaction;
    expect((await waiting).map((e) => e.seq)).toEqual([2]);
  });
});
