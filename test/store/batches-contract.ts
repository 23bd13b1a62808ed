/**
 * The datasets and batches part of the storage contract (issue 40): every backend of the port must
 * pass it. Datasets: create with their items in one write (a conflict leaves nothing), read back,
 * list by tenant with a cursor, items by position, delete. Batches: the same rows, item counts and
 * pages by status, and the queue: claims oldest batch first and lowest position first within a
 * batch's concurrency, leases and fencing tokens (an expired lease is claimed again, and the worker
 * that lost it can no longer renew, set its run or finish), a finish exactly once that completes the
 * batch with its last item, cancellation, late scores, and concurrent claimers and finishers (from
 * two store instances when the backend can share a database). Erasing a session removes the dataset
 * and batch items copied from it.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  NotFoundError,
  StoreError,
  type BatchItemRecord,
  type BatchRecord,
  type DatasetRecord,
  type NewBatchItem,
  type NewDatasetItem,
  type Store,
} from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const T0 = 1_700_000_000_000;
const LEASE = 30_000;

const DONE = { status: 'done' as const, result: { ok: true }, scores: {}, error: null };

export function datasetsContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`datasets contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    const dataset = (o: Partial<Omit<DatasetRecord, 'itemCount'>> = {}): Omit<DatasetRecord, 'itemCount'> => ({
      id: randomUUID(),
      tenant: 't1',
      name: 'regressions',
      source: { runs: ['r1', 'r2'], filter: { agent: 'a@1' } },
      createdAt: T0,
      ...o,
    });
    const item = (o: Partial<NewDatasetItem> = {}): NewDatasetItem => ({
      id: randomUUID(),
      sourceSessionId: 's1',
      sourceRunId: randomUUID(),
      data: { context: [{ role: 'user', content: 'hi \u0000 there' }], requests: [] },
      expected: null,
      notes: null,
      ...o,
    });

    it('creates a dataset with its items in order, reads back every field, refuses a second with the same id', async () => {
      const d = dataset();
      const items = [
        item({ expected: 'the answer', notes: 'why' }),
        item({ expected: { score: 1, tags: ['a'] } }),
        item({ expected: 42 }),
      ];
      expect(await store.datasets.create(d, items)).toEqual({ ...d, itemCount: 3 });
      expect(await store.datasets.get(d.id)).toEqual({ ...d, itemCount: 3 });
      const stored = await store.datasets.items(d.id, { limit: 10 });
      expect(stored).toEqual(items.map((it, position) => ({ ...it, datasetId: d.id, position, createdAt: T0 })));
      expect(await store.datasets.item(items[1]!.id)).toEqual(stored[1]);
      await expect(store.datasets.create(d, [])).rejects.toMatchObject({ code: 'conflict' });
      expect(await store.datasets.get('nope')).toBeUndefined();
      expect(await store.datasets.item('nope')).toBeUndefined();
      // An empty dataset, without a tenant.
      const empty = dataset({ tenant: null });
      expect(await store.datasets.create(empty, [])).toEqual({ ...empty, itemCount: 0 });
    });

    it('a dataset whose item conflicts is not created at all', async () => {
      const taken = item();
      await store.datasets.create(dataset(), [taken]);
      const d = dataset();
      await expect(store.datasets.create(d, [item(), taken])).rejects.toBeInstanceOf(StoreError);
      await expect(store.datasets.create(d, [item(), taken])).rejects.toMatchObject({ code: 'conflict' });
      expect(await store.datasets.get(d.id)).toBeUndefined();
      expect(await store.datasets.items(d.id, { limit: 10 })).toEqual([]);
    });

    it('lists by id after a cursor, a tenant’s only when given', async () => {
      const ids: string[] = [];
      for (let k = 0; k < 3; k++) ids.push((await store.datasets.create(dataset(), [item()])).id);
      await store.datasets.create(dataset({ tenant: 't2' }), []);
      ids.sort();
      const mine = await store.datasets.list({ tenant: 't1', limit: 10 });
      expect(mine.map((d) => d.id)).toEqual(ids);
      expect(mine.map((d) => d.itemCount)).toEqual([1, 1, 1]);
      expect((await store.datasets.list({ tenant: 't1', after: ids[0]!, limit: 1 })).map((d) => d.id)).toEqual([
        ids[1],
      ]);
      expect(await store.datasets.list({ limit: 10 })).toHaveLength(4);
      expect(await store.datasets.list({ tenant: 't3', limit: 10 })).toEqual([]);
    });

    it('pages items by position', async () => {
      const d = dataset();
      const items = Array.from({ length: 7 }, () => item());
      await store.datasets.create(d, items);
      const first = await store.datasets.items(d.id, { limit: 3 });
      expect(first.map((i) => i.position)).toEqual([0, 1, 2]);
      const next = await store.datasets.items(d.id, { afterPosition: 2, limit: 3 });
      expect(next.map((i) => i.id)).toEqual(items.slice(3, 6).map((i) => i.id));
      expect((await store.datasets.items(d.id, { afterPosition: 5, limit: 3 })).map((i) => i.position)).toEqual([6]);
      expect(await store.datasets.items(d.id, { afterPosition: 6, limit: 3 })).toEqual([]);
    });

    it('a large dataset is created in one write, its items in order', async () => {
      const d = dataset();
      const items = Array.from({ length: 1201 }, (_, k) => item({ notes: `n${k}` }));
      expect((await store.datasets.create(d, items)).itemCount).toBe(1201);
      const tail = await store.datasets.items(d.id, { afterPosition: 1198, limit: 10 });
      expect(tail.map((i) => [i.position, i.notes])).toEqual([
        [1199, 'n1199'],
        [1200, 'n1200'],
      ]);
    });

    it('deletes a dataset with its items', async () => {
      const d = dataset();
      const [one] = [item()];
      await store.datasets.create(d, [one!]);
      expect(await store.datasets.delete(d.id)).toBe(true);
      expect(await store.datasets.get(d.id)).toBeUndefined();
      expect(await store.datasets.item(one!.id)).toBeUndefined();
      expect(await store.datasets.delete(d.id)).toBe(false);
    });

    it('inside a transaction: created with the rest, or not at all', async () => {
      const d = dataset();
      await expect(
        store.transaction(async (tx) => {
          await tx.datasets.create(d, [item()]);
          expect((await tx.datasets.get(d.id))!.itemCount).toBe(1);
          throw new StoreError('test', 'roll back');
        }),
      ).rejects.toThrow('roll back');
      expect(await store.datasets.get(d.id)).toBeUndefined();
      await store.transaction(async (tx) => {
        // A conflict inside leaves the transaction usable.
        await tx.datasets.create(d, [item()]);
        await expect(tx.datasets.create(d, [item()])).rejects.toMatchObject({ code: 'conflict' });
      });
      expect((await store.datasets.get(d.id))!.itemCount).toBe(1);
    });

    it('erasing a session removes the items copied from it: the dataset stays, with fewer items', async () => {
      await store.sessions.create({ id: 'src', createdAt: T0 });
      await store.sessions.create({ id: 'kept', createdAt: T0 });
      const d = dataset();
      const items = [
        item({ sourceSessionId: 'src' }),
        item({ sourceSessionId: 'kept' }),
        item({ sourceSessionId: 'src' }),
      ];
      await store.datasets.create(d, items);
      await store.sessions.erase('src', T0 + 10);
      expect((await store.datasets.get(d.id))!.itemCount).toBe(1);
      expect((await store.datasets.list({ limit: 10 }))[0]!.itemCount).toBe(1);
      expect((await store.datasets.items(d.id, { limit: 10 })).map((i) => [i.id, i.position])).toEqual([
        [items[1]!.id, 1],
      ]);
      expect(await store.datasets.item(items[0]!.id)).toBeUndefined();
    });
  });
}

export function batchesContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`batches contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;
    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });
    afterEach(async () => {
      await opened.cleanup();
    });

    const batch = (o: Partial<Omit<BatchRecord, 'status' | 'endedAt'>> = {}) => ({
      id: randomUUID(),
      tenant: 't1',
      kind: 'experiment' as const,
      spec: { dataset: 'd1', candidates: [{ agent: 'a@2' }] },
      concurrency: 2,
      createdAt: T0,
      ...o,
    });
    const item = (o: Partial<NewBatchItem> = {}): NewBatchItem => {
      const id = randomUUID();
      return { id, key: `k-${id}`, sourceSessionId: 's1', subject: { datasetItemId: id, candidate: 0 }, ...o };
    };
    /** A batch of `n` items; its items' ids in position order. */
    const withItems = async (n: number, o: Partial<Omit<BatchRecord, 'status' | 'endedAt'>> = {}) => {
      const items = Array.from({ length: n }, () => item());
      const b = await store.batches.create(batch(o), items);
      return { batch: b, ids: items.map((i) => i.id) };
    };
    const claimed = async (on: Store, owner: string, now = T0) => {
      const c = await on.batches.claim(owner, LEASE, now);
      expect(c).toBeDefined();
      return c!;
    };

    it('creates a running batch of pending items, reads back every field, refuses a second with the same id', async () => {
      const b = batch();
      const items = [item(), item({ sourceSessionId: null, key: 'run-1', subject: { runId: 'run-1' } })];
      const created = await store.batches.create(b, items);
      expect(created).toEqual({ ...b, status: 'running', endedAt: null });
      expect(await store.batches.get(b.id)).toEqual(created);
      const stored = await store.batches.items(b.id, { limit: 10 });
      expect(stored).toEqual(
        items.map((it, position): BatchItemRecord => ({
          ...it,
          batchId: b.id,
          position,
          status: 'pending',
          runId: null,
          attempt: 0,
          lease: null,
          fencingToken: 0,
          result: null,
          scores: {},
          error: null,
          startedAt: null,
          endedAt: null,
        })),
      );
      expect(await store.batches.item(items[1]!.id)).toEqual(stored[1]);
      expect(await store.batches.counts(b.id)).toEqual({ pending: 2, running: 0, done: 0, failed: 0 });
      await expect(store.batches.create(b, [])).rejects.toMatchObject({ code: 'conflict' });
      expect(await store.batches.get('nope')).toBeUndefined();
      expect(await store.batches.item('nope')).toBeUndefined();
    });

    it('a batch with two items of one key, or an item id taken, is not created at all', async () => {
      const b = batch();
      await expect(store.batches.create(b, [item({ key: 'same' }), item({ key: 'same' })])).rejects.toMatchObject({
        code: 'conflict',
      });
      expect(await store.batches.get(b.id)).toBeUndefined();
      const taken = item();
      await store.batches.create(batch(), [taken]);
      await expect(store.batches.create(b, [item(), taken])).rejects.toMatchObject({ code: 'conflict' });
      expect(await store.batches.get(b.id)).toBeUndefined();
      // The same key in another batch is another item.
      await store.batches.create(b, [item({ key: taken.key })]);
    });

    it('lists by id after a cursor, a tenant’s or a kind’s only when given', async () => {
      const ids: string[] = [];
      for (let k = 0; k < 3; k++) ids.push((await store.batches.create(batch(), [])).id);
      const reruns = await store.batches.create(batch({ kind: 'reruns', spec: { runs: ['r1'] } }), []);
      await store.batches.create(batch({ tenant: 't2' }), []);
      await store.batches.create(batch({ tenant: null }), []);
      ids.sort();
      expect((await store.batches.list({ tenant: 't1', kind: 'experiment', limit: 10 })).map((b) => b.id)).toEqual(ids);
      expect(
        (await store.batches.list({ tenant: 't1', kind: 'experiment', after: ids[0]!, limit: 1 })).map((b) => b.id),
      ).toEqual([ids[1]]);
      expect(await store.batches.list({ kind: 'reruns', limit: 10 })).toEqual([reruns]);
      expect(await store.batches.list({ tenant: 't1', limit: 10 })).toHaveLength(4);
      expect(await store.batches.list({ limit: 10 })).toHaveLength(6);
    });

    it('pages items by position, only those in the statuses given; counts them by status', async () => {
      const { batch: b, ids } = await withItems(6, { concurrency: 6 });
      for (let k = 0; k < 3; k++) {
        const c = await claimed(store, 'w');
        await store.batches.finish(c.id, c.fencingToken, k === 1 ? { ...DONE, status: 'failed' } : DONE, T0 + 1);
      }
      await claimed(store, 'w');
      expect(await store.batches.counts(b.id)).toEqual({ pending: 2, running: 1, done: 2, failed: 1 });
      expect((await store.batches.items(b.id, { limit: 2 })).map((i) => i.id)).toEqual(ids.slice(0, 2));
      expect((await store.batches.items(b.id, { afterPosition: 1, limit: 2 })).map((i) => i.id)).toEqual(
        ids.slice(2, 4),
      );
      const ended = await store.batches.items(b.id, { limit: 10, statuses: ['done', 'failed'] });
      expect(ended.map((i) => [i.position, i.status])).toEqual([
        [0, 'done'],
        [1, 'failed'],
        [2, 'done'],
      ]);
      expect(
        (await store.batches.items(b.id, { afterPosition: 3, limit: 10, statuses: ['pending'] })).map(
          (i) => i.position,
        ),
      ).toEqual([4, 5]);
      expect(await store.batches.items(b.id, { limit: 10, statuses: [] })).toEqual([]);
      expect(await store.batches.counts('nope')).toEqual({ pending: 0, running: 0, done: 0, failed: 0 });
    });

    it('claims oldest batch first, lowest position first, never more running than a batch’s concurrency', async () => {
      const older = await withItems(3, { concurrency: 2, createdAt: T0 });
      const newer = await withItems(2, { concurrency: 1, createdAt: T0 + 1 });
      const first = await claimed(store, 'w1');
      expect(first).toMatchObject({
        id: older.ids[0],
        status: 'running',
        attempt: 1,
        fencingToken: 1,
        lease: { owner: 'w1', expiresAt: T0 + LEASE },
        startedAt: T0,
      });
      expect((await claimed(store, 'w2')).id).toBe(older.ids[1]);
      // The older batch is at its concurrency: the newer one's turn.
      expect((await claimed(store, 'w3')).id).toBe(newer.ids[0]);
      expect(await store.batches.claim('w4', LEASE, T0)).toBeUndefined();
      expect(await store.batches.item(first.id)).toEqual(first);
      // An item ends: room again in the older batch.
      expect(await store.batches.finish(first.id, first.fencingToken, DONE, T0 + 5)).toBe(true);
      expect((await claimed(store, 'w4', T0 + 6)).id).toBe(older.ids[2]);
      expect(await store.batches.claim('w5', LEASE, T0 + 6)).toBeUndefined();
    });

    it('an expired lease is claimed again with a higher token: the worker that lost it can no longer renew, set its run or finish', async () => {
      const { batch: b, ids } = await withItems(1, { concurrency: 1 });
      const lost = await claimed(store, 'w1');
      // While the lease lives, nothing else is claimed; its holder renews it.
      expect(await store.batches.claim('w2', LEASE, T0 + LEASE - 1)).toBeUndefined();
      expect(await store.batches.renew(lost.id, 'w2', lost.fencingToken, T0 + 2 * LEASE)).toBe(false);
      expect(await store.batches.renew(lost.id, 'w1', lost.fencingToken + 1, T0 + 2 * LEASE)).toBe(false);
      expect(await store.batches.renew(lost.id, 'w1', lost.fencingToken, T0 + 2 * LEASE)).toBe(true);
      expect(await store.batches.claim('w2', LEASE, T0 + 2 * LEASE - 1)).toBeUndefined();
      expect(await store.batches.setRun(lost.id, lost.fencingToken, 'run-1')).toBe(true);
      // Expired (at its end exactly): claimed again.
      const now = T0 + 2 * LEASE;
      const again = await claimed(store, 'w2', now);
      expect(again).toMatchObject({
        id: ids[0],
        status: 'running',
        attempt: 2,
        fencingToken: lost.fencingToken + 1,
        lease: { owner: 'w2', expiresAt: now + LEASE },
        startedAt: T0,
        runId: 'run-1',
      });
      expect(await store.batches.renew(lost.id, 'w1', lost.fencingToken, now + 5 * LEASE)).toBe(false);
      expect(await store.batches.setRun(lost.id, lost.fencingToken, 'run-stale')).toBe(false);
      expect(await store.batches.finish(lost.id, lost.fencingToken, DONE, now + 1)).toBe(false);
      expect(await store.batches.item(lost.id)).toEqual(again);
      expect(await store.batches.setRun(again.id, again.fencingToken, 'run-2')).toBe(true);
      expect(await store.batches.finish(again.id, again.fencingToken, DONE, now + 2)).toBe(true);
      expect(await store.batches.item(again.id)).toMatchObject({ runId: 'run-2', status: 'done', lease: null });
      expect((await store.batches.get(b.id))!.status).toBe('completed');
    });

    it('a finish is exactly once, and the last one completes the batch in the same write', async () => {
      const { batch: b } = await withItems(2, { concurrency: 2 });
      const one = await claimed(store, 'w1');
      const two = await claimed(store, 'w2');
      const end = {
        status: 'failed' as const,
        result: null,
        scores: { exact: 0 },
        error: { message: 'the model refused' },
      };
      expect(await store.batches.finish(one.id, one.fencingToken, end, T0 + 10)).toBe(true);
      expect(await store.batches.finish(one.id, one.fencingToken, DONE, T0 + 11)).toBe(false);
      expect(await store.batches.item(one.id)).toMatchObject({
        status: 'failed',
        result: null,
        scores: { exact: 0 },
        error: { message: 'the model refused' },
        lease: null,
        endedAt: T0 + 10,
      });
      expect((await store.batches.get(b.id))!).toMatchObject({ status: 'running', endedAt: null });
      // Ended: no renewal, no run.
      expect(await store.batches.renew(one.id, 'w1', one.fencingToken, T0 + LEASE * 3)).toBe(false);
      expect(await store.batches.setRun(one.id, one.fencingToken, 'late')).toBe(false);
      // Ended items are never claimed again, even long after.
      expect(await store.batches.claim('w3', LEASE, T0 + 10 * LEASE)).toMatchObject({ id: two.id, attempt: 2 });
      const again = (await store.batches.item(two.id))!;
      expect(
        await store.batches.finish(
          two.id,
          again.fencingToken,
          { ...DONE, result: { answer: 'Paris' }, scores: { exact: 1 } },
          T0 + 20,
        ),
      ).toBe(true);
      expect(await store.batches.get(b.id)).toMatchObject({ status: 'completed', endedAt: T0 + 20 });
      expect(await store.batches.counts(b.id)).toEqual({ pending: 0, running: 0, done: 1, failed: 1 });
      expect(await store.batches.claim('w4', LEASE, T0 + 20 * LEASE)).toBeUndefined();
    });

    it('a cancelled batch is not claimed from; its running items still finish, and it stays cancelled', async () => {
      const { batch: b } = await withItems(3, { concurrency: 3 });
      const running = await claimed(store, 'w1');
      expect(await store.batches.cancel(b.id, T0 + 5)).toBe(true);
      expect(await store.batches.cancel(b.id, T0 + 6)).toBe(false);
      expect(await store.batches.get(b.id)).toMatchObject({ status: 'cancelled', endedAt: T0 + 5 });
      expect(await store.batches.claim('w2', LEASE, T0 + 10)).toBeUndefined();
      // Nor is an expired item of it.
      expect(await store.batches.claim('w2', LEASE, T0 + 10 * LEASE)).toBeUndefined();
      expect(await store.batches.finish(running.id, running.fencingToken, DONE, T0 + 10 * LEASE)).toBe(true);
      expect(await store.batches.get(b.id)).toMatchObject({ status: 'cancelled', endedAt: T0 + 5 });
      expect(await store.batches.counts(b.id)).toEqual({ pending: 2, running: 0, done: 1, failed: 0 });
      expect(await store.batches.cancel('nope', T0)).toBe(false);
      // Another batch is claimed from as before.
      const other = await withItems(1);
      expect((await claimed(store, 'w3', T0 + 10 * LEASE)).id).toBe(other.ids[0]);
    });

    it('late scores merge into an item’s (new keys win), before and after it ends; an unknown item is not found', async () => {
      const { ids } = await withItems(1);
      expect((await store.batches.addScores(ids[0]!, { person: 4 })).scores).toEqual({ person: 4 });
      const c = await claimed(store, 'w');
      await store.batches.finish(c.id, c.fencingToken, { ...DONE, scores: { exact: 1, person: 3 } }, T0 + 1);
      expect((await store.batches.item(c.id))!.scores).toEqual({ person: 3, exact: 1 });
      const scored = await store.batches.addScores(c.id, { person: 5, rubric: { clarity: 0.5, notes: 'ok' } });
      expect(scored).toMatchObject({
        status: 'done',
        scores: { person: 5, exact: 1, rubric: { clarity: 0.5, notes: 'ok' } },
      });
      expect(await store.batches.item(c.id)).toEqual(scored);
      await expect(store.batches.addScores('nope', { a: 1 })).rejects.toBeInstanceOf(NotFoundError);
    });

    it('inside a transaction: a claim and the run it started commit together, or not at all', async () => {
      const { ids } = await withItems(1);
      await expect(
        store.transaction(async (tx) => {
          const c = (await tx.batches.claim('w1', LEASE, T0))!;
          expect(await tx.batches.setRun(c.id, c.fencingToken, 'run-1')).toBe(true);
          throw new StoreError('test', 'roll back');
        }),
      ).rejects.toThrow('roll back');
      expect(await store.batches.item(ids[0]!)).toMatchObject({ status: 'pending', fencingToken: 0, runId: null });
      const c = await store.transaction(async (tx) => {
        const c = (await tx.batches.claim('w1', LEASE, T0))!;
        await tx.batches.setRun(c.id, c.fencingToken, 'run-1');
        return c;
      });
      expect(await store.batches.item(ids[0]!)).toMatchObject({
        status: 'running',
        fencingToken: c.fencingToken,
        runId: 'run-1',
      });
    });

    it('concurrent claimers, from two instances: each item to one of them, never more than the concurrency', async () => {
      const other = opened.another ? await opened.another() : store;
      const { batch: b, ids } = await withItems(10, { concurrency: 10 });
      const got = await Promise.all(
        Array.from({ length: 20 }, (_, k) => (k % 2 ? other : store).batches.claim(`w${k}`, LEASE, T0)),
      );
      const items = got.filter((c): c is BatchItemRecord => c !== undefined);
      expect(items).toHaveLength(10);
      expect(new Set(items.map((c) => c.id))).toEqual(new Set(ids));
      expect(items.every((c) => c.fencingToken === 1 && c.attempt === 1)).toBe(true);
      expect(await store.batches.counts(b.id)).toEqual({ pending: 0, running: 10, done: 0, failed: 0 });

      // A batch of 10 with room for 3: three claims win.
      const narrow = await withItems(10, { concurrency: 3, createdAt: T0 + 1 });
      const some = await Promise.all(
        Array.from({ length: 8 }, (_, k) => (k % 2 ? other : store).batches.claim(`v${k}`, LEASE, T0)),
      );
      expect(some.filter((c) => c !== undefined).map((c) => c!.batchId)).toEqual([
        narrow.batch.id,
        narrow.batch.id,
        narrow.batch.id,
      ]);

      // Every item of the first finishing at once, from both instances: each once, the batch completed.
      const finished = await Promise.all(
        items.flatMap((c, k) => [
          (k % 2 ? other : store).batches.finish(c.id, c.fencingToken, DONE, T0 + 100),
          (k % 2 ? store : other).batches.finish(c.id, c.fencingToken, DONE, T0 + 100),
        ]),
      );
      expect(finished.filter(Boolean)).toHaveLength(10);
      expect(await store.batches.get(b.id)).toMatchObject({ status: 'completed', endedAt: T0 + 100 });
    });

    it('erasing a session removes the batch items copied from it, and completes a batch left with nothing to do', async () => {
      await store.sessions.create({ id: 'src', createdAt: T0 });
      await store.sessions.create({ id: 'kept', createdAt: T0 });
      const mixed = await store.batches.create(batch({ concurrency: 1 }), [
        item({ sourceSessionId: 'kept' }),
        item({ sourceSessionId: 'src' }),
        item({ sourceSessionId: null }),
      ]);
      const only = await store.batches.create(batch({ createdAt: T0 + 1 }), [
        item({ sourceSessionId: 'src' }),
        item({ sourceSessionId: 'src' }),
      ]);
      const c = await claimed(store, 'w');
      expect(c.sourceSessionId).toBe('kept');
      await store.batches.finish(c.id, c.fencingToken, DONE, T0 + 1);
      await store.sessions.erase('src', T0 + 10);
      expect((await store.batches.items(mixed.id, { limit: 10 })).map((i) => [i.sourceSessionId, i.position])).toEqual([
        ['kept', 0],
        [null, 2],
      ]);
      expect(await store.batches.get(mixed.id)).toMatchObject({ status: 'running' });
      expect(await store.batches.items(only.id, { limit: 10 })).toEqual([]);
      expect(await store.batches.get(only.id)).toMatchObject({ status: 'completed', endedAt: T0 + 10 });
      // The item left is claimed, and its finish completes its batch.
      const last = await claimed(store, 'w', T0 + 11);
      expect(last.sourceSessionId).toBeNull();
      expect(await store.batches.finish(last.id, last.fencingToken, DONE, T0 + 12)).toBe(true);
      expect(await store.batches.get(mixed.id)).toMatchObject({ status: 'completed', endedAt: T0 + 12 });
    });
  });
}
