/**
 * Reads outside transactions on PostgreSQL (ADR-0049, read-batch.ts): those called in one turn of
 * the event loop go to one pooled connection, written together (the connection pipelines), each
 * still its own statement with its own answer: one refused fails alone, and none waits for a lock
 * another transaction holds.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { StoreError } from '../../src/store/index.ts';
import type { PostgresStore } from '../../src/store/postgres/index.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { sentDuring } from '../support/sent-statements.ts';

const T0 = 1_700_000_000_000;

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups) await c();
  cleanups = [];
});

async function open(): Promise<PostgresStore> {
  const { store, cleanup } = await openTestPostgres({ poolSize: 4 });
  cleanups.push(cleanup);
  for (const id of ['s1', 's2', 's3']) await store.sessions.create({ id, createdAt: T0 });
  await store.runs.create({
    id: 'r1',
    sessionId: 's1',
    agent: { name: 'a', version: '1' },
    agentSpec: {},
    createdAt: T0,
  });
  return store;
}

describe('PostgreSQL: reads outside transactions, written together', () => {
  it('reads called together go on one connection, each sent before the one before it was answered', async () => {
    const store = await open();
    let read: unknown[] = [];
    const sent = await sentDuring(async () => {
      read = await Promise.all([
        store.sessions.get('s1'),
        store.runs.get('r1'),
        store.sessions.get('s2'),
        store.inputs.list('s1', 'steer', 'r1'),
        store.runs.getCheckpoint('r1'),
        store.sessions.get('s3'),
      ]);
    });
    expect(read).toMatchObject([{ id: 's1' }, { id: 'r1' }, { id: 's2' }, [], undefined, { id: 's3' }]);
    expect(sent).toHaveLength(6);
    expect(new Set(sent.map((s) => s.client)).size).toBe(1);
    expect(sent.slice(1).every((s) => s.pipelined)).toBe(true);
  });

  it('many reads at once are spread over connections, 16 on each, so the server still runs them side by side', async () => {
    const store = await open();
    let read: unknown[] = [];
    const sent = await sentDuring(async () => {
      read = await Promise.all(Array.from({ length: 40 }, (_, i) => store.sessions.get(`s${(i % 3) + 1}`)));
    });
    expect(read.every((s) => s !== undefined)).toBe(true);
    const perClient = new Map<number, number>();
    for (const s of sent) perClient.set(s.client, (perClient.get(s.client) ?? 0) + 1);
    expect([...perClient.values()].sort((a, b) => b - a)).toEqual([16, 16, 8]);
  });

  it('a read refused by the server fails alone: the others of its batch are answered', async () => {
    const store = await open();
    const [before, refused, after] = await Promise.allSettled([
      store.sessions.get('s1'),
      // PostgreSQL cannot hold U+0000 in text: the statement is refused.
      store.runs.getCheckpoint('r\u0000'),
      store.runs.get('r1'),
    ]);
    expect(before).toMatchObject({ status: 'fulfilled', value: { id: 's1' } });
    expect(refused.status).toBe('rejected');
    expect((refused as PromiseRejectedResult).reason).toBeInstanceOf(StoreError);
    expect((refused as PromiseRejectedResult).reason).toMatchObject({ code: 'validation' });
    expect(after).toMatchObject({ status: 'fulfilled', value: { id: 'r1' } });
  });

  it('a read never waits for a row another transaction holds', async () => {
    const store = await open();
    let release!: () => void;
    const held = new Promise<void>((resolve) => (release = resolve));
    let locked!: () => void;
    const isLocked = new Promise<void>((resolve) => (locked = resolve));
    // The run's row and the session's, held FOR UPDATE until released.
    const holder = store.transaction(async (tx) => {
      await Promise.all([tx.runs.get('r1'), tx.sessions.get('s1')]);
      locked();
      await held;
    });
    await isLocked;
    const read = await Promise.all([store.runs.get('r1'), store.sessions.get('s1'), store.sessions.get('s2')]);
    expect(read).toMatchObject([{ id: 'r1' }, { id: 's1' }, { id: 's2' }]);
    release();
    await holder;
  });
});
