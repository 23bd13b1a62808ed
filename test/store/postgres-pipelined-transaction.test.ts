/**
 * A PostgreSQL transaction's operations called side by side (ADR-0048): those of one statement and
 * no savepoint are sent without waiting for the answer of the one before (the connection
 * pipelines), so reads made together share a round trip; their statements still go in the order
 * the operations were called, and nothing is sent inside another operation's savepoint, so a
 * refusal that operation recovers from does not fail a read called beside it.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { FencedError, StoreError, type EventDraft } from '../../src/store/index.ts';
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
  await store.sessions.create({ id: 's', createdAt: T0 });
  return store;
}

const note = (n: number): EventDraft => ({
  id: `e${n}`,
  type: 'test/note',
  v: 1,
  time: T0,
  entry: false,
  data: { n },
});

const newRun = (id: string) => ({
  id,
  sessionId: 's',
  agent: { name: 'a', version: '1' },
  agentSpec: {},
  queuedBehind: id !== 'r1',
  createdAt: T0,
});

describe('PostgreSQL: a transaction’s operations side by side', () => {
  it('reads called together are sent together, in the order they were called', async () => {
    const store = await open();
    await store.runs.create(newRun('r1'));
    await store.inputs.add({ id: 'i1', sessionId: 's', kind: 'steer', runId: 'r1', payload: {}, createdAt: T0 });
    let read: unknown[] = [];
    const sent = await sentDuring(async () => {
      read = await store.transaction((tx) =>
        Promise.all([
          tx.runs.get('r1'),
          tx.inputs.list('s', 'steer', 'r1'),
          tx.runs.list({ parentRunId: 'r1', limit: 10 }),
        ]),
      );
    });
    expect(read).toMatchObject([{ id: 'r1' }, [{ id: 'i1' }], []]);
    const statements = sent.filter((s) => !/^(BEGIN|COMMIT)/.test(s.text));
    expect(statements.map((s) => s.text.slice(0, 40))).toEqual([
      expect.stringMatching(/^SELECT \* FROM runs WHERE id = \$1/),
      expect.stringMatching(/^SELECT \* FROM run_inputs/),
      expect.stringMatching(/^SELECT \* FROM runs WHERE parent_run_id/),
    ]);
    // BEGIN goes first, unanswered; every read after it goes before the one before it was answered.
    expect(statements.every((s) => s.pipelined)).toBe(true);
  });

  it('a write nothing waits for is seen by the read called after it', async () => {
    const store = await open();
    await store.runs.create(newRun('r1'));
    const seen = await store.transaction(async (tx) => {
      const written = tx.runs.putCheckpoint({ runId: 'r1', step: 3, seq: 0, state: { n: 1 } });
      const read = await tx.runs.getCheckpoint('r1');
      await written;
      return read;
    });
    expect(seen).toMatchObject({ runId: 'r1', step: 3, state: { n: 1 } });
  });

  it('a read called while an operation in a savepoint is refused waits for it, and the transaction goes on', async () => {
    const store = await open();
    await store.runs.create(newRun('r1'));
    const result = await store.transaction(async (tx) => {
      // The second create is refused in its savepoint (the id exists); the read called beside it
      // must not be sent inside that savepoint, or the refusal would fail it too.
      const refused = tx.runs.create(newRun('r1')).catch((e: unknown) => e);
      const read = tx.runs.get('r1');
      const created = tx.runs.create(newRun('r2'));
      return { refused: await refused, read: await read, created: await created };
    });
    expect(result.refused).toBeInstanceOf(StoreError);
    expect((result.refused as StoreError).code).toBe('conflict');
    expect(result.read?.id).toBe('r1');
    expect(result.created.id).toBe('r2');
    expect((await store.runs.get('r2'))?.id).toBe('r2');
  });

  it('an append that fails its transaction when refused (abortsTransaction) does not hold back what is called after it', async () => {
    const store = await open();
    await store.runs.create(newRun('r1'));
    const fence = { runId: 'r1', token: 0 };
    const sent = await sentDuring(async () => {
      await store.transaction(async (tx) => {
        const appended = tx.events.append('s', [note(1)], { fence, abortsTransaction: true });
        const read = tx.runs.get('r1');
        expect((await appended).map((e) => e.seq)).toEqual([1]);
        expect((await read)?.id).toBe('r1');
      });
    });
    const statements = sent.filter((s) => !/^(BEGIN|COMMIT)/.test(s.text));
    expect(statements.map((s) => s.text.slice(0, 40))).toEqual([
      expect.stringMatching(/keel_append/),
      expect.stringMatching(/^SELECT \* FROM runs WHERE id/),
    ]);
    // No savepoint, and the read went with the append.
    expect(statements.every((s) => s.pipelined)).toBe(true);
    // Without it, an append is made in a savepoint and what comes after waits for its answer.
    const guarded = await sentDuring(async () => {
      await store.transaction(async (tx) => {
        await Promise.all([tx.events.append('s', [note(2)], { fence }), tx.runs.get('r1')]);
      });
    });
    expect(guarded.map((s) => s.text.slice(0, 30))).toContainEqual(expect.stringMatching(/^SAVEPOINT/));
    expect(guarded.find((s) => s.text.startsWith('SELECT * FROM runs'))?.pipelined).toBe(false);
  });

  it('an append refused with abortsTransaction fails the transaction with its refusal, which keeps nothing', async () => {
    const store = await open();
    await store.runs.create(newRun('r1'));
    const failure = await store
      .transaction(async (tx) => {
        // A stale token: the fence refuses the append; the write called after it was sent with it.
        const appended = tx.events.append('s', [note(1)], {
          fence: { runId: 'r1', token: 7 },
          abortsTransaction: true,
        });
        const written = tx.runs.putCheckpoint({ runId: 'r1', step: 1, seq: 0, state: {} });
        written.catch(() => {});
        await appended;
      })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(FencedError);
    expect(await store.events.read('s')).toEqual([]);
    expect(await store.runs.getCheckpoint('r1')).toBeUndefined();
  });

  it('a refused statement nothing waited for fails the transaction, which keeps nothing', async () => {
    const store = await open();
    await store.runs.create(newRun('r1'));
    const failure = await store
      .transaction(async (tx) => {
        // A run id PostgreSQL cannot store (a NUL): the statement is refused on the server.
        const written = tx.runs.putCheckpoint({ runId: 'r\u0000', step: 1, seq: 0, state: {} });
        written.catch(() => {});
        await tx.inputs.add({ id: 'i2', sessionId: 's', kind: 'steer', runId: 'r1', payload: {}, createdAt: T0 });
        await written;
      })
      .catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(StoreError);
    expect((failure as StoreError).code).toBe('validation');
    expect(await store.inputs.list('s', 'steer', 'r1')).toEqual([]);
  });
});
