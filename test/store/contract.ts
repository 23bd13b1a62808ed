/**
 * The storage contract: every backend of the port (src/store/port/) must pass this suite.
 *
 * It tests port semantics only — nothing about how a backend stores things. `open()` must return a
 * fresh, empty store each time (a new file, a new schema, ...) and a `cleanup()` that closes it (if
 * still open) and removes whatever it created.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  BLOB_HEAD_CHARS,
  NotFoundError,
  RunBusyError,
  SeqConflictError,
  StoreError,
  type EventDraft,
  type NewSession,
  type Snapshot,
  type Store,
  type StoredEvent,
} from '../../src/store/index.ts';

/** A store a contract suite opens before each test: the same shape for every suite. */
export interface OpenedStore {
  store: Store;
  /** A second store instance on the same database (optional: not every backend can share one). */
  another?: () => Promise<Store>;
  cleanup(): Promise<void>;
}

const T0 = 1_700_000_000_000;

function draft(overrides: Partial<EventDraft> = {}): EventDraft {
  return { id: randomUUID(), type: 'test/note', v: 1, time: T0, entry: false, data: { n: 1 }, ...overrides };
}

function entry(overrides: Partial<EventDraft> = {}): EventDraft {
  return draft({ type: 'test/message', entry: true, ...overrides });
}

function gate(): { promise: Promise<void>; open(): void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}

const bySeq = (a: StoredEvent, b: StoredEvent): number => a.seq - b.seq;
const ids = (events: readonly StoredEvent[]): string[] => events.map((e) => e.id);
const seqs = (events: readonly StoredEvent[]): number[] => events.map((e) => e.seq);
const range = (from: number, to: number): number[] => Array.from({ length: to - from + 1 }, (_, i) => from + i);

export function storeContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`store contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;

    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });

    afterEach(async () => {
      await opened.cleanup();
    });

    const session = (id: string = randomUUID(), extra: Partial<NewSession> = {}) =>
      store.sessions.create({ id, createdAt: T0, ...extra });

    describe('sessions', () => {
      it('creates a session with defaults and reads it back', async () => {
        const created = await store.sessions.create({ id: 's1', createdAt: T0 });
        expect(created).toEqual({
          id: 's1',
          tenant: 'default',
          createdAt: T0,
          title: null,
          metadata: {},
          agent: null,
          lastSeq: 0,
          lastTurn: 0,
          leafId: null,
          origin: null,
          archivedAt: null,
          erasedAt: null,
          erasedTotals: null,
          inArchiveAt: null,
        });
        expect(await store.sessions.get('s1')).toEqual(created);
      });

      it('stores every field of a new session, including its origin', async () => {
        const metadata = { tags: ['a', 'b'], nested: { x: 1, y: null }, flag: true, text: 'ünïcødé ✓' };
        const created = await store.sessions.create({
          id: 's2',
          createdAt: T0 + 5,
          title: 'A title',
          metadata,
          agent: 'helper',
          origin: { sessionId: 's1', entryId: 'e9' },
          tenant: 'acme',
        });
        const expected = {
          id: 's2',
          tenant: 'acme',
          createdAt: T0 + 5,
          title: 'A title',
          metadata,
          agent: 'helper',
          lastSeq: 0,
          lastTurn: 0,
          leafId: null,
          origin: { sessionId: 's1', entryId: 'e9' },
          archivedAt: null,
          erasedAt: null,
          erasedTotals: null,
          inArchiveAt: null,
        };
        expect(created).toEqual(expected);
        expect(await store.sessions.get('s2')).toEqual(expected);
      });

      it('returns undefined for an unknown session', async () => {
        expect(await store.sessions.get('nope')).toBeUndefined();
      });

      it('rejects a duplicate session id and keeps the original', async () => {
        await store.sessions.create({ id: 'dup', createdAt: T0, title: 'first' });
        await expect(store.sessions.create({ id: 'dup', createdAt: T0 + 1, title: 'second' })).rejects.toMatchObject({
          code: 'conflict',
        });
        const s = await store.sessions.get('dup');
        expect(s?.title).toBe('first');
        expect(s?.createdAt).toBe(T0);
      });

      it('lists sessions ordered by id, page by page with `after` and `limit`', async () => {
        for (const id of ['s-c', 's-a', 's-e', 's-b', 's-d']) await session(id);
        expect((await store.sessions.list({ limit: 100 })).map((s) => s.id)).toEqual([
          's-a',
          's-b',
          's-c',
          's-d',
          's-e',
        ]);

        const pages: string[][] = [];
        let after: string | undefined;
        for (;;) {
          const page = await store.sessions.list({ limit: 2, ...(after !== undefined ? { after } : {}) });
          if (page.length === 0) break;
          pages.push(page.map((s) => s.id));
          after = page.at(-1)!.id;
        }
        expect(pages).toEqual([['s-a', 's-b'], ['s-c', 's-d'], ['s-e']]);

        const listed = await store.sessions.list({ after: 's-b', limit: 1 });
        expect(listed).toEqual([await store.sessions.get('s-c')]);
      });

      it('hides archived sessions from the list unless includeArchived', async () => {
        for (const id of ['s-a', 's-b', 's-c', 's-d', 's-e']) await session(id);
        await store.sessions.update('s-b', { archivedAt: T0 + 10 });
        await store.sessions.update('s-d', { archivedAt: T0 + 20 });

        expect((await store.sessions.list({ limit: 100 })).map((s) => s.id)).toEqual(['s-a', 's-c', 's-e']);
        expect((await store.sessions.list({ limit: 2 })).map((s) => s.id)).toEqual(['s-a', 's-c']);
        expect((await store.sessions.list({ limit: 2, after: 's-c' })).map((s) => s.id)).toEqual(['s-e']);
        const all = await store.sessions.list({ limit: 100, includeArchived: true });
        expect(all.map((s) => s.id)).toEqual(['s-a', 's-b', 's-c', 's-d', 's-e']);
        expect(all.find((s) => s.id === 's-d')?.archivedAt).toBe(T0 + 20);
        // Archived sessions are still readable directly.
        expect((await store.sessions.get('s-b'))?.archivedAt).toBe(T0 + 10);

        await store.sessions.update('s-b', { archivedAt: null });
        expect((await store.sessions.list({ limit: 100 })).map((s) => s.id)).toEqual(['s-a', 's-b', 's-c', 's-e']);
      });

      it('patches only the given fields of a session', async () => {
        await session('p', { title: 'old', metadata: { a: 1 }, agent: 'bot' });
        await store.events.append('p', [entry()]);
        const before = (await store.sessions.get('p'))!;

        await store.sessions.update('p', { title: 'new' });
        expect(await store.sessions.get('p')).toEqual({ ...before, title: 'new' });

        await store.sessions.update('p', { metadata: { b: [2, 3] } });
        expect(await store.sessions.get('p')).toEqual({ ...before, title: 'new', metadata: { b: [2, 3] } });

        await store.sessions.update('p', { archivedAt: T0 + 1 });
        expect(await store.sessions.get('p')).toEqual({
          ...before,
          title: 'new',
          metadata: { b: [2, 3] },
          archivedAt: T0 + 1,
        });

        await store.sessions.update('p', { title: null, archivedAt: null });
        expect(await store.sessions.get('p')).toEqual({
          ...before,
          title: null,
          metadata: { b: [2, 3] },
          archivedAt: null,
        });

        await store.sessions.update('p', {});
        expect(await store.sessions.get('p')).toEqual({
          ...before,
          title: null,
          metadata: { b: [2, 3] },
          archivedAt: null,
        });
      });

      it('refuses to update an unknown session with NotFoundError', async () => {
        await expect(store.sessions.update('ghost', { title: 'x' })).rejects.toBeInstanceOf(NotFoundError);
        expect(await store.sessions.get('ghost')).toBeUndefined();
      });
    });

    describe('append and read', () => {
      it('keeps the highest turn of the events appended: the next turn is one more', async () => {
        await session('t');
        expect((await store.sessions.get('t'))!.lastTurn).toBe(0);
        await store.events.append('t', [draft(), draft({ turn: 1 })]);
        expect((await store.sessions.get('t'))!.lastTurn).toBe(1);
        await store.events.append('t', [draft({ turn: 3 }), draft({ turn: 2 }), draft()]);
        expect((await store.sessions.get('t'))!.lastTurn).toBe(3);
        await store.events.append('t', [draft()]);
        expect((await store.sessions.get('t'))!).toMatchObject({ lastTurn: 3, lastSeq: 6 });
      });

      it('allocates seqs 1..n with no gap over several appends and returns what readEvents returns', async () => {
        await session('s');
        const returned: StoredEvent[] = [];
        returned.push(
          ...(await store.events.append('s', [entry({ data: { text: 'hi', list: [1, { deep: true }] } })])),
        );
        returned.push(
          ...(await store.events.append('s', [
            draft({ type: 'test/delta', runId: 'r1', turn: 1, step: 2, ignorable: true, data: 'a string' }),
            entry({ runId: 'r1', turn: 1, step: 2, v: 3, time: T0 + 7, data: null }),
            draft({ data: 42 }),
          ])),
        );
        returned.push(...(await store.events.append('s', [draft({ data: [] }), entry({ data: { unicode: 'ø→✓' } })])));

        expect(seqs(returned)).toEqual(range(1, 6));
        expect(returned.every((e) => e.sessionId === 's')).toBe(true);
        expect(await store.events.read('s')).toEqual(returned);

        const s = (await store.sessions.get('s'))!;
        expect(s.lastSeq).toBe(6);
        expect(s.leafId).toBe(returned[5]!.id);

        const [first, delta, second] = returned;
        expect(first).toEqual({
          id: first!.id,
          sessionId: 's',
          seq: 1,
          type: 'test/message',
          v: 1,
          time: T0,
          entry: true,
          ignorable: false,
          data: { text: 'hi', list: [1, { deep: true }] },
        });
        expect(first!.parentId).toBeUndefined();
        expect(first!.runId).toBeUndefined();
        expect(delta).toMatchObject({
          seq: 2,
          type: 'test/delta',
          runId: 'r1',
          turn: 1,
          step: 2,
          ignorable: true,
          entry: false,
          data: 'a string',
        });
        expect(delta!.parentId).toBeUndefined();
        expect(second).toMatchObject({ seq: 3, v: 3, time: T0 + 7, entry: true, parentId: first!.id, data: null });
      });

      it('an empty batch writes nothing', async () => {
        await session('s');
        await store.events.append('s', [entry()]);
        expect(await store.events.append('s', [])).toEqual([]);
        expect((await store.sessions.get('s'))!.lastSeq).toBe(1);
        expect(seqs(await store.events.append('s', [draft()]))).toEqual([2]);
      });

      it('keeps sessions apart: each has its own seqs and tree', async () => {
        await session('a');
        await session('b');
        const a1 = await store.events.append('a', [entry(), entry()]);
        const b1 = await store.events.append('b', [entry()]);
        const a2 = await store.events.append('a', [entry()]);
        expect(seqs(b1)).toEqual([1]);
        expect(b1[0]!.parentId).toBeUndefined();
        expect(seqs(a2)).toEqual([3]);
        expect(a2[0]!.parentId).toBe(a1[1]!.id);
        expect(ids(await store.events.read('a'))).toEqual(ids([...a1, ...a2]));
        expect(ids(await store.events.read('b'))).toEqual(ids(b1));
      });

      it('a batch is atomic: a failing draft leaves nothing of it behind', async () => {
        await session('s');
        const existing = await store.events.append('s', [entry(), draft()]);
        const before = (await store.sessions.get('s'))!;

        const batch = [entry(), draft({ leaf: null }), entry({ id: existing[0]!.id }), entry()];
        await expect(store.events.append('s', batch)).rejects.toMatchObject({ code: 'conflict' });

        expect(await store.events.read('s')).toEqual(existing);
        expect(
          await store.events.entries(
            's',
            batch.map((d) => d.id),
          ),
        ).toEqual(existing.slice(0, 1));
        expect(await store.sessions.get('s')).toEqual(before);

        const next = await store.events.append('s', [entry()]);
        expect(seqs(next)).toEqual([3]);
        expect(next[0]!.parentId).toBe(existing[0]!.id);
      });

      it("a step's two entries: an id that exists is a conflict and nothing is written; a parent earlier in the batch is found", async () => {
        await session('s');
        const [e1] = await store.events.append('s', [entry()]);
        const before = (await store.sessions.get('s'))!;
        const fresh = entry();
        const failed = store.events.append('s', [fresh, entry({ id: e1!.id })]);
        await expect(failed).rejects.toMatchObject({ code: 'conflict' });
        expect(await store.events.entries('s', [fresh.id])).toEqual([]);
        expect(await store.sessions.get('s')).toEqual(before);
        const x = entry();
        const [sx, sy] = await store.events.append('s', [x, entry({ parentId: x.id })]);
        expect(sx!.parentId).toBe(e1!.id);
        expect(sy!.parentId).toBe(x.id);
        expect((await store.events.entries('s', [sy!.id]))[0]!.parentId).toBe(x.id);
      });

      it('a batch with the same id twice fails as a whole', async () => {
        await session('s');
        const d = entry();
        await expect(store.events.append('s', [d, draft(), { ...d }])).rejects.toThrow();
        expect(await store.events.read('s')).toEqual([]);
        expect((await store.sessions.get('s'))!.lastSeq).toBe(0);
        expect(seqs(await store.events.append('s', [d]))).toEqual([1]);
      });

      it('threads entries under the current leaf and makes each the new leaf', async () => {
        await session('s');
        const [e1] = await store.events.append('s', [entry()]);
        expect(e1!.parentId).toBeUndefined();
        expect((await store.sessions.get('s'))!.leafId).toBe(e1!.id);

        const [n1] = await store.events.append('s', [draft()]);
        expect(n1!.parentId).toBeUndefined();
        expect((await store.sessions.get('s'))!.leafId).toBe(e1!.id);

        const [e2, n2, e3] = await store.events.append('s', [entry(), draft(), entry()]);
        expect(e2!.parentId).toBe(e1!.id);
        expect(n2!.parentId).toBeUndefined();
        expect(e3!.parentId).toBe(e2!.id);
        expect((await store.sessions.get('s'))!.leafId).toBe(e3!.id);
      });

      it('honours an explicit parentId, including null for a new root', async () => {
        await session('s');
        const [e1, e2, e3] = await store.events.append('s', [entry(), entry(), entry()]);
        expect(e3!.parentId).toBe(e2!.id);

        const [b1] = await store.events.append('s', [entry({ parentId: e1!.id })]);
        expect(b1!.parentId).toBe(e1!.id);
        expect((await store.sessions.get('s'))!.leafId).toBe(b1!.id);

        const [b2] = await store.events.append('s', [entry()]);
        expect(b2!.parentId).toBe(b1!.id);

        const [root] = await store.events.append('s', [entry({ parentId: null })]);
        expect(root!.parentId).toBeUndefined();
        expect((await store.sessions.get('s'))!.leafId).toBe(root!.id);

        // Within one batch: an explicit parent may be an earlier draft of the same batch.
        const x = entry();
        const [, y, z] = await store.events.append('s', [x, entry({ parentId: e2!.id }), entry({ parentId: x.id })]);
        expect(y!.parentId).toBe(e2!.id);
        expect(z!.parentId).toBe(x.id);
        expect((await store.sessions.get('s'))!.leafId).toBe(z!.id);
      });

      it('a non-entry event moves the leaf only when it carries `leaf`', async () => {
        await session('s');
        const [e1, e2] = await store.events.append('s', [entry(), entry()]);

        await store.events.append('s', [draft({ type: 'test/branch', leaf: e1!.id })]);
        expect((await store.sessions.get('s'))!.leafId).toBe(e1!.id);
        const [e3] = await store.events.append('s', [entry()]);
        expect(e3!.parentId).toBe(e1!.id);

        await store.events.append('s', [draft()]);
        expect((await store.sessions.get('s'))!.leafId).toBe(e3!.id);

        const [sw, e4] = await store.events.append('s', [draft({ leaf: e2!.id }), entry()]);
        expect(sw!.parentId).toBeUndefined();
        expect(e4!.parentId).toBe(e2!.id);

        await store.events.append('s', [draft({ leaf: null })]);
        expect((await store.sessions.get('s'))!.leafId).toBeNull();
        const [e5] = await store.events.append('s', [entry()]);
        expect(e5!.parentId).toBeUndefined();
        expect((await store.sessions.get('s'))!.leafId).toBe(e5!.id);
      });

      it('checks expectLastSeq: SeqConflictError on mismatch and nothing written', async () => {
        await session('s');
        expect(seqs(await store.events.append('s', [entry()], { expectLastSeq: 0 }))).toEqual([1]);
        expect(seqs(await store.events.append('s', [entry(), draft()], { expectLastSeq: 1 }))).toEqual([2, 3]);
        const before = (await store.sessions.get('s'))!;
        const events = await store.events.read('s');

        for (const stale of [0, 2, 4]) {
          const d = entry();
          const err = await store.events.append('s', [d], { expectLastSeq: stale }).then(
            () => undefined,
            (e: unknown) => e,
          );
          expect(err).toBeInstanceOf(SeqConflictError);
          expect(err).toBeInstanceOf(StoreError);
          expect((err as StoreError).code).toBe('seq_conflict');
          expect(await store.events.entries('s', [d.id])).toEqual([]);
        }
        expect(await store.sessions.get('s')).toEqual(before);
        expect(await store.events.read('s')).toEqual(events);
        expect(seqs(await store.events.append('s', [draft()], { expectLastSeq: 3 }))).toEqual([4]);
      });

      it('refuses to append to an unknown session with NotFoundError', async () => {
        const err = await store.events.append('ghost', [entry()]).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(err).toBeInstanceOf(NotFoundError);
        expect((err as StoreError).code).toBe('not_found');
        await expect(store.events.append('ghost', [entry()], { expectLastSeq: 0 })).rejects.toBeInstanceOf(
          NotFoundError,
        );
        expect(await store.sessions.get('ghost')).toBeUndefined();
      });

      it('reads a window of events with afterSeq, untilSeq and limit', async () => {
        await session('s');
        await session('other');
        await store.events.append(
          's',
          range(1, 10).map((n) => (n % 3 === 0 ? entry({ data: n }) : draft({ data: n }))),
        );
        await store.events.append('other', [draft(), draft()]);

        const window = async (o: Parameters<Store['events']['read']>[1]) => seqs(await store.events.read('s', o));
        expect(await window({})).toEqual(range(1, 10));
        expect(await window({ afterSeq: 3 })).toEqual(range(4, 10));
        expect(await window({ untilSeq: 5 })).toEqual(range(1, 5));
        expect(await window({ afterSeq: 3, untilSeq: 7 })).toEqual(range(4, 7));
        expect(await window({ limit: 2 })).toEqual([1, 2]);
        expect(await window({ afterSeq: 3, limit: 2 })).toEqual([4, 5]);
        expect(await window({ afterSeq: 8, limit: 5 })).toEqual([9, 10]);
        expect(await window({ afterSeq: 2, untilSeq: 4, limit: 10 })).toEqual([3, 4]);
        expect(await window({ afterSeq: 10 })).toEqual([]);
        expect(await window({ afterSeq: 5, untilSeq: 5 })).toEqual([]);
        expect(await window({ untilSeq: 0 })).toEqual([]);
        expect((await store.events.read('s', { afterSeq: 6, limit: 1 }))[0]!.data).toBe(7);
        expect(await store.events.read('nobody')).toEqual([]);
      });

      it('gets entries by id within the session, skipping unknown ids and events that are not entries', async () => {
        await session('s');
        await session('other');
        const events = await store.events.append('s', [entry(), draft(), entry(), draft()]);
        const [foreign] = await store.events.append('other', [entry()]);

        const got = await store.events.entries('s', [events[2]!.id, 'unknown', events[0]!.id, foreign!.id]);
        expect(got.sort(bySeq)).toEqual([events[0], events[2]]);
        expect(await store.events.entries('s', [])).toEqual([]);
        expect(await store.events.entries('s', ['unknown'])).toEqual([]);
        expect(await store.events.entries('s', [events[1]!.id, events[3]!.id])).toEqual([]);
        expect(await store.events.entries('other', [events[0]!.id])).toEqual([]);
        expect(await store.events.entries('other', [foreign!.id])).toEqual([foreign]);
      });
    });

    describe('events.ancestors', () => {
      it('returns the entry and its ancestors, nearest first, at most `limit`', async () => {
        await session('s');
        const [e1, , e2, e3] = await store.events.append('s', [entry(), draft(), entry(), entry()]);
        const [b1, b2] = await store.events.append('s', [entry({ parentId: e2!.id }), entry()]);
        const [e4] = await store.events.append('s', [entry({ parentId: e3!.id })]);

        expect(await store.events.ancestors('s', e4!.id, 100)).toEqual([e4, e3, e2, e1]);
        expect(await store.events.ancestors('s', b2!.id, 100)).toEqual([b2, b1, e2, e1]);
        expect(await store.events.ancestors('s', e4!.id, 2)).toEqual([e4, e3]);
        expect(await store.events.ancestors('s', e4!.id, 1)).toEqual([e4]);
        expect(await store.events.ancestors('s', e4!.id, 0)).toEqual([]);
        expect(await store.events.ancestors('s', e4!.id, 4)).toEqual([e4, e3, e2, e1]);
        expect(await store.events.ancestors('s', e1!.id, 100)).toEqual([e1]);
        expect(await store.events.ancestors('s', 'unknown', 100)).toEqual([]);
      });

      it('stops at a new root', async () => {
        await session('s');
        await store.events.append('s', [entry(), entry()]);
        const [r, c] = await store.events.append('s', [entry({ parentId: null }), entry()]);
        expect(await store.events.ancestors('s', c!.id, 100)).toEqual([c, r]);
      });

      it('never crosses into another session', async () => {
        await session('a');
        await session('b');
        const [a1, a2] = await store.events.append('a', [entry(), entry()]);
        const [b1] = await store.events.append('b', [entry()]);

        expect(await store.events.ancestors('b', a2!.id, 100)).toEqual([]);
        expect(await store.events.ancestors('a', b1!.id, 100)).toEqual([]);

        // The tree never spans sessions: a parent from another session is refused.
        const stray = entry({ parentId: a2!.id });
        await expect(store.events.append('b', [stray])).rejects.toMatchObject({ code: 'invalid_parent' });
        expect(await store.events.entries('b', [stray.id])).toEqual([]);
        expect(await store.events.ancestors('a', a2!.id, 100)).toEqual([a2, a1]);
      });
    });

    describe('erasure', () => {
      const hash = (c: string) => `sha256:${c.repeat(64)}`;
      it("removes a session's events, own blobs, snapshots, checkpoints, inputs, run payloads and idempotency records; keeps a tombstone with its totals; leaves other sessions whole", async () => {
        await session('s');
        await session('other');
        // A blob of its own, and one that another session refers to too.
        await store.events.putBlobs([
          { hash: hash('a'), data: '"mine only"' },
          { hash: hash('b'), data: '"shared"' },
        ]);
        await store.events.append('s', [
          entry({ data: { text: { $blob: hash('a') } } }),
          draft({ data: { system: hash('b') } }),
        ]);
        const otherEvents = await store.events.append('other', [entry({ data: { text: { $blob: hash('b') } } })]);
        await store.events.seal('s');
        await store.events.append('s', [draft({ data: 'open row' })]);
        const run = await store.runs.create({
          id: 'r-s',
          sessionId: 's',
          agent: { name: 'a', version: '1' },
          agentSpec: { system: 'secret prompt' },
          createdAt: T0,
          options: { x: 1 },
        });
        await store.runs.update('r-s', {
          status: 'completed',
          endedAt: T0,
          usage: { inputTokens: 7, outputTokens: 3 },
          cost: 0.5,
          error: { message: 'detail' },
        });
        await store.runs.putCheckpoint({ runId: run.id, step: 1, seq: 2, state: { v: 2 } });
        await store.events.putSnapshot({
          sessionId: 's',
          projection: 'p',
          version: 1,
          asOfSeq: 1,
          leafId: null,
          state: { text: 'cached' },
        });
        await store.inputs.add({
          id: 'in-1',
          sessionId: 's',
          kind: 'message',
          runId: null,
          payload: { text: 'queued words' },
          createdAt: T0,
        });
        await store.idempotency.put({
          tenant: 'default',
          key: 'k-s',
          fingerprint: 'f',
          status: 201,
          body: JSON.stringify({ id: 's', title: 'private' }),
          createdAt: T0,
        });
        await store.idempotency.put({
          tenant: 'default',
          key: 'k-other',
          fingerprint: 'f',
          status: 201,
          body: JSON.stringify({ id: 'other' }),
          createdAt: T0,
        });
        const beforeOther = await store.sessions.get('other');

        // Not while a run of the session is live.
        const live = await store.runs.create({
          id: 'r-live',
          sessionId: 's',
          agent: { name: 'a', version: '1' },
          agentSpec: {},
          createdAt: T0,
        });
        await expect(store.sessions.erase('s', T0 + 1)).rejects.toBeInstanceOf(RunBusyError);
        expect((await store.events.read('s')).length).toBe(3);
        await store.runs.update(live.id, { status: 'cancelled', endedAt: T0 });

        const tomb = await store.sessions.erase('s', T0 + 2);
        expect(tomb).toMatchObject({
          id: 's',
          tenant: 'default',
          erasedAt: T0 + 2,
          title: null,
          metadata: {},
          leafId: null,
          erasedTotals: { runs: 2, cost: 0.5, usage: { inputTokens: 7, outputTokens: 3 } },
        });
        expect(await store.sessions.get('s')).toEqual(tomb);
        expect(await store.events.read('s')).toEqual([]);
        expect(await store.events.entries('s', ['x'])).toEqual([]);
        expect((await store.events.getBlobs([hash('a'), hash('b')])).size).toBe(1);
        expect((await store.events.getBlobs([hash('b')])).get(hash('b'))).toBe('"shared"');
        expect(await store.events.getSnapshot('s', 'p', 1)).toBeUndefined();
        expect(await store.runs.getCheckpoint(run.id)).toBeUndefined();
        expect(await store.inputs.count('s', 'message')).toBe(0);
        expect(await store.runs.get(run.id)).toMatchObject({
          status: 'completed',
          usage: { inputTokens: 7, outputTokens: 3 },
          cost: 0.5,
          agentSpec: {},
          options: {},
          error: null,
        });
        expect(await store.idempotency.get('default', 'k-s')).toBeUndefined();
        expect(await store.idempotency.get('default', 'k-other')).toBeDefined();
        // The erased session takes nothing more; erasing it again gives the same tombstone.
        await expect(store.events.append('s', [draft()])).rejects.toMatchObject({ code: 'session_erased' });
        expect(await store.sessions.erase('s', T0 + 9)).toEqual(tomb);
        // The other session is whole.
        expect(await store.events.read('other')).toEqual(otherEvents);
        expect(await store.sessions.get('other')).toEqual(beforeOther);
        await expect(store.sessions.erase('ghost', T0)).rejects.toBeInstanceOf(NotFoundError);
      });
    });

    describe('erasure and shared blobs', () => {
      it('keeps a blob that a surviving session refers to, also when that session first referred to it in a transaction that rolled back', async () => {
        const h = `sha256:${'c'.repeat(64)}`;
        await session('keep');
        await session('gone');
        await store.events.putBlobs([{ hash: h, data: '"shared words"' }]);
        await expect(
          store.transaction(async (tx) => {
            await tx.events.append('keep', [entry({ data: { text: { $blob: h } } })]);
            throw new Error('roll back');
          }),
        ).rejects.toThrow('roll back');
        await store.events.append('keep', [entry({ data: { text: { $blob: h } } })]);
        await store.events.append('gone', [entry({ data: { text: { $blob: h } } })]);
        await store.sessions.erase('gone', T0);
        expect((await store.events.getBlobs([h])).get(h)).toBe('"shared words"');
      });

      it('keeps it also when the rolled-back reference shared its commit with writes that committed', async () => {
        const h = `sha256:${'d'.repeat(64)}`;
        await session('keep');
        await session('gone');
        await store.events.putBlobs([{ hash: h, data: '"shared words"' }]);
        // Issued together: with group commit (SQLite) they share one transaction, each unit in its savepoint.
        const [first, undone, other] = await Promise.allSettled([
          store.events.append('gone', [entry()]),
          store.transaction(async (tx) => {
            await tx.events.append('keep', [entry({ data: { text: { $blob: h } } })]);
            throw new Error('roll back');
          }),
          store.events.append('gone', [entry({ data: { text: { $blob: h } } })]),
        ]);
        expect([first.status, undone.status, other.status]).toEqual(['fulfilled', 'rejected', 'fulfilled']);
        await store.events.append('keep', [entry({ data: { text: { $blob: h } } })]);
        await store.sessions.erase('gone', T0);
        expect((await store.events.getBlobs([h])).get(h)).toBe('"shared words"');
        await store.sessions.erase('keep', T0);
        expect((await store.events.getBlobs([h])).has(h)).toBe(false);
      });
    });

    describe('sealing', () => {
      it('changes nothing that can be read: events, seqs, ids, entries, ancestors and the session head', async () => {
        await session('s');
        await session('other');
        const appended = [
          ...(await store.events.append('s', [entry({ data: { text: 'a'.repeat(300) } }), draft()])),
          ...(await store.events.append('s', [
            draft({ runId: 'r1', turn: 1, step: 1, ignorable: true, data: [1, 'two', { three: null }] }),
            entry({ runId: 'r1', turn: 1 }),
          ])),
          ...(await store.events.append('s', [entry({ data: 'é ☃ \u0000 "quoted"' })])),
        ];
        await store.events.append('other', [entry(), draft()]);
        const before = {
          events: await store.events.read('s'),
          head: await store.sessions.get('s'),
          other: await store.events.read('other'),
        };
        expect(before.events).toEqual(appended);

        await store.events.seal('s');
        expect(await store.events.read('s')).toEqual(before.events);
        expect(await store.sessions.get('s')).toEqual(before.head);
        expect(await store.events.read('other')).toEqual(before.other);
        const entries = appended.filter((e) => e.entry);
        expect((await store.events.entries('s', ids(entries))).sort(bySeq)).toEqual(entries);
        expect(await store.events.ancestors('s', entries.at(-1)!.id, 100)).toEqual([...entries].reverse());
        expect(await store.events.read('s', { runId: 'r1' })).toEqual(appended.slice(2, 4));
        // Every window of the sealed events reads as before.
        for (let after = 0; after <= 5; after++) {
          for (let until = after; until <= 5; until++) {
            expect(seqs(await store.events.read('s', { afterSeq: after, untilSeq: until }))).toEqual(
              range(after + 1, until),
            );
          }
          expect(seqs(await store.events.read('s', { afterSeq: after, limit: 2 }))).toEqual(
            range(after + 1, Math.min(after + 2, 5)),
          );
        }

        // Sealing again is harmless; appends go on after the sealed events, in the same tree.
        await store.events.seal('s');
        const more = await store.events.append('s', [entry(), draft()]);
        expect(seqs(more)).toEqual([6, 7]);
        expect(more[0]!.parentId).toBe(entries.at(-1)!.id);
        await store.events.seal('s');
        expect(await store.events.read('s')).toEqual([...appended, ...more]);
        expect(await store.events.read('s', { afterSeq: 4, limit: 2 })).toEqual([appended[4], more[0]]);
        expect(await store.events.ancestors('s', more[0]!.id, 2)).toEqual([more[0], entries.at(-1)]);
      });

      it('indexes every entry of a long turn when it seals it, and refuses their ids again', async () => {
        await session('s');
        // 129 entries: more than one statement's worth of rows where a store batches them, and one left over.
        const appended = [
          ...(await store.events.append(
            's',
            Array.from({ length: 100 }, () => entry()),
          )),
          ...(await store.events.append(
            's',
            Array.from({ length: 29 }, () => entry()),
          )),
        ];
        await store.events.seal('s');
        expect((await store.events.entries('s', ids(appended))).sort(bySeq)).toEqual(appended);
        expect(await store.events.ancestors('s', appended.at(-1)!.id, 500)).toEqual([...appended].reverse());
        for (const e of [appended[0]!, appended[64]!, appended[128]!]) {
          await expect(store.events.append('s', [entry({ id: e.id })])).rejects.toMatchObject({ code: 'conflict' });
        }
      });

      it('seals an empty session, and inside a transaction that rolls back leaves the rows as they were', async () => {
        await session('empty');
        await store.events.seal('empty');
        expect(await store.events.read('empty')).toEqual([]);
        await session('s');
        const events = await store.events.append('s', [entry(), draft()]);
        await expect(
          store.transaction(async (tx) => {
            await tx.events.append('s', [draft()]);
            await tx.events.seal('s');
            throw new Error('roll back');
          }),
        ).rejects.toThrow('roll back');
        expect(await store.events.read('s')).toEqual(events);
        await store.transaction(async (tx) => {
          await tx.events.append('s', [draft()]);
          await tx.events.seal('s');
        });
        expect(seqs(await store.events.read('s'))).toEqual([1, 2, 3]);
      });

      it('refuses an unknown session with NotFoundError', async () => {
        await expect(store.events.seal('ghost')).rejects.toBeInstanceOf(NotFoundError);
      });
    });

    describe('blobs', () => {
      it('stores blobs by hash and returns only the known ones', async () => {
        const big = 'x'.repeat(200_000);
        await store.events.putBlobs([
          { hash: 'h1', data: 'one' },
          { hash: 'h2', data: '{"json":["ünïcødé","✓"]}' },
          { hash: 'h3', data: big },
        ]);
        const got = await store.events.getBlobs(['h1', 'missing', 'h2', 'h3']);
        expect(got).toBeInstanceOf(Map);
        expect([...got.keys()].sort()).toEqual(['h1', 'h2', 'h3']);
        expect(got.get('h1')).toBe('one');
        expect(got.get('h2')).toBe('{"json":["ünïcødé","✓"]}');
        expect(got.get('h3')).toBe(big);
        expect((await store.events.getBlobs([])).size).toBe(0);
        expect((await store.events.getBlobs(['missing'])).size).toBe(0);
      });

      it('putting a hash that exists is a no-op', async () => {
        await store.events.putBlobs([{ hash: 'h', data: 'original' }]);
        await store.events.putBlobs([{ hash: 'h', data: 'original' }]);
        await store.events.putBlobs([
          { hash: 'h', data: 'different' },
          { hash: 'k', data: 'k' },
        ]);
        await store.events.putBlobs([
          { hash: 'j', data: 'j' },
          { hash: 'j', data: 'j' },
        ]);
        await store.events.putBlobs([]);
        const got = await store.events.getBlobs(['h', 'j', 'k']);
        expect(Object.fromEntries(got)).toEqual({ h: 'original', j: 'j', k: 'k' });
      });

      it('knows a blob’s size, media type and encoding without its text (null for a field’s JSON)', async () => {
        const text = 'é'.repeat(1000);
        await store.events.putBlobs([
          { hash: 'field', data: '"json"' },
          { hash: 'text', data: text, mediaType: 'text/plain; charset=utf-8' },
          { hash: 'file', data: 'AAEC', mediaType: 'image/png', encoding: 'base64' },
        ]);
        const info = await store.events.blobInfo(['field', 'text', 'file', 'missing']);
        expect(Object.fromEntries(info)).toEqual({
          field: { hash: 'field', size: 6, mediaType: null, encoding: null },
          text: { hash: 'text', size: 2000, mediaType: 'text/plain; charset=utf-8', encoding: null },
          file: { hash: 'file', size: 4, mediaType: 'image/png', encoding: 'base64' },
        });
        expect((await store.events.blobInfo([])).size).toBe(0);
      });

      it('reads the first characters of a blob, from its kept head or its text, and nothing for a missing one', async () => {
        // A large payload (a media type, longer than the head kept): the head answers short reads.
        const long = `${'😀é'.repeat(40_000)}z`;
        const small = 'ab€😀'.repeat(10);
        await store.events.putBlobs([
          { hash: 'long', data: long, mediaType: 'text/plain; charset=utf-8' },
          { hash: 'small', data: small, mediaType: 'text/plain; charset=utf-8' },
          { hash: 'field', data: '"json text"' },
        ]);
        for (const n of [1, 10, 1000, BLOB_HEAD_CHARS, BLOB_HEAD_CHARS + 10]) {
          const head = (await store.events.blobHead('long', n))!;
          // Characters as the backend counts them (code points or UTF-16 units): at least n UTF-8
          // bytes' worth, and a prefix of the text.
          expect(long.startsWith(head)).toBe(true);
          expect(Buffer.byteLength(head)).toBeGreaterThanOrEqual(n);
        }
        expect(await store.events.blobHead('small', 1000)).toBe(small);
        expect(await store.events.blobHead('field', 5)).toBe('"json');
        expect(await store.events.blobHead('missing', 5)).toBeUndefined();
      });

      it('says whether a session of a tenant refers to a blob', async () => {
        const h = `sha256:${'e'.repeat(64)}`;
        await session('mine', { tenant: 'acme' });
        await session(randomUUID(), { tenant: 'globex' });
        await store.events.putBlobs([{ hash: h, data: 'x' }]);
        expect(await store.events.blobTenant(h, 'acme')).toBe(false);
        await store.events.append('mine', [
          entry({ data: { output: { value: { $blob: h, size: 1, mediaType: 'text/plain' } } } }),
        ]);
        const uuid = randomUUID();
        await session(uuid, { tenant: 'initech' });
        await store.events.append(uuid, [entry({ data: { text: { $blob: h } } })]);
        expect(await store.events.blobTenant(h, 'acme')).toBe(true);
        expect(await store.events.blobTenant(h, 'initech')).toBe(true);
        expect(await store.events.blobTenant(h, 'globex')).toBe(false);
        expect(await store.events.blobTenant(`sha256:${'f'.repeat(64)}`, 'acme')).toBe(false);
        // Erased: its references go with it.
        await store.sessions.erase(uuid, T0);
        expect(await store.events.blobTenant(h, 'initech')).toBe(false);
      });
    });

    describe('snapshots', () => {
      const snap = (overrides: Partial<Snapshot> = {}): Snapshot => ({
        sessionId: 's',
        projection: 'messages',
        version: 1,
        asOfSeq: 5,
        leafId: 'leaf-5',
        state: { messages: [{ role: 'user', text: 'hi' }], count: 1, nothing: null },
        ...overrides,
      });

      it('puts and gets a snapshot', async () => {
        await session('s');
        await store.events.putSnapshot(snap());
        expect(await store.events.getSnapshot('s', 'messages', 1)).toEqual(snap());

        await store.events.putSnapshot(snap({ projection: 'usage', leafId: null, state: [1, 2, 3] }));
        expect(await store.events.getSnapshot('s', 'usage', 1)).toEqual(
          snap({ projection: 'usage', leafId: null, state: [1, 2, 3] }),
        );
        await store.events.putSnapshot(snap({ version: 2, asOfSeq: 1, state: 'v2' }));
        expect(await store.events.getSnapshot('s', 'messages', 2)).toEqual(
          snap({ version: 2, asOfSeq: 1, state: 'v2' }),
        );
        // Keys are independent.
        expect(await store.events.getSnapshot('s', 'messages', 1)).toEqual(snap());
      });

      it('a newer snapshot replaces an older one, never the other way round', async () => {
        await session('s');
        await store.events.putSnapshot(snap({ asOfSeq: 5, state: 'five' }));
        await store.events.putSnapshot(snap({ asOfSeq: 9, leafId: 'leaf-9', state: 'nine' }));
        expect(await store.events.getSnapshot('s', 'messages', 1)).toEqual(
          snap({ asOfSeq: 9, leafId: 'leaf-9', state: 'nine' }),
        );

        await store.events.putSnapshot(snap({ asOfSeq: 7, leafId: 'leaf-7', state: 'seven' }));
        expect(await store.events.getSnapshot('s', 'messages', 1)).toEqual(
          snap({ asOfSeq: 9, leafId: 'leaf-9', state: 'nine' }),
        );
      });

      it('returns undefined for an unknown snapshot', async () => {
        await session('s');
        await store.events.putSnapshot(snap());
        expect(await store.events.getSnapshot('s', 'messages', 3)).toBeUndefined();
        expect(await store.events.getSnapshot('s', 'other', 1)).toBeUndefined();
        expect(await store.events.getSnapshot('nobody', 'messages', 1)).toBeUndefined();
      });
    });

    describe('transactions', () => {
      it('commits every operation together and returns what the function returns', async () => {
        await session('existing');
        const result = await store.transaction(async (tx) => {
          await tx.sessions.create({ id: 'new', createdAt: T0, title: 'fresh' });
          const a = await tx.events.append('new', [entry(), draft()]);
          const b = await tx.events.append('existing', [entry()], { expectLastSeq: 0 });
          await tx.sessions.update('existing', { title: 'renamed' });
          await tx.events.putBlobs([{ hash: 'tx-blob', data: 'data' }]);
          await tx.events.putSnapshot({
            sessionId: 'new',
            projection: 'p',
            version: 1,
            asOfSeq: 2,
            leafId: a[0]!.id,
            state: { ok: true },
          });
          // Reads inside the transaction see its own writes.
          expect((await tx.sessions.get('new'))!.lastSeq).toBe(2);
          expect(ids(await tx.events.read('new'))).toEqual(ids(a));
          return { a, b };
        });

        expect(await store.events.read('new')).toEqual(result.a);
        expect(await store.events.read('existing')).toEqual(result.b);
        expect(await store.sessions.get('new')).toMatchObject({ title: 'fresh', lastSeq: 2, leafId: result.a[0]!.id });
        expect(await store.sessions.get('existing')).toMatchObject({ title: 'renamed', lastSeq: 1 });
        expect((await store.events.getBlobs(['tx-blob'])).get('tx-blob')).toBe('data');
        expect(await store.events.getSnapshot('new', 'p', 1)).toMatchObject({ asOfSeq: 2, state: { ok: true } });
      });

      it('rolls everything back when the function throws, and rethrows its error', async () => {
        await session('existing', { title: 'kept' });
        const before = await store.events.append('existing', [entry(), draft()]);
        const sessionBefore = (await store.sessions.get('existing'))!;
        const boom = new Error('boom');

        const outcome = store.transaction(async (tx) => {
          await tx.sessions.create({ id: 'doomed', createdAt: T0 });
          await tx.events.append('doomed', [entry()]);
          await tx.events.append('existing', [entry(), entry(), draft({ leaf: null })]);
          await tx.sessions.update('existing', { title: 'changed', metadata: { changed: true } });
          await tx.events.putBlobs([{ hash: 'doomed-blob', data: 'x' }]);
          await tx.events.putSnapshot({
            sessionId: 'existing',
            projection: 'p',
            version: 1,
            asOfSeq: 5,
            leafId: null,
            state: 1,
          });
          throw boom;
        });
        await expect(outcome).rejects.toBe(boom);

        expect(await store.sessions.get('doomed')).toBeUndefined();
        expect(await store.events.read('doomed')).toEqual([]);
        expect(await store.sessions.get('existing')).toEqual(sessionBefore);
        expect(await store.events.read('existing')).toEqual(before);
        expect((await store.events.getBlobs(['doomed-blob'])).size).toBe(0);
        expect(await store.events.getSnapshot('existing', 'p', 1)).toBeUndefined();

        // The store is still usable and seqs continue where they were.
        expect(seqs(await store.events.append('existing', [entry()]))).toEqual([3]);
        await session('doomed');
      });

      it('a failed batch inside a transaction leaves nothing behind when the error is caught', async () => {
        await session('s');
        const [first] = await store.events.append('s', [entry()]);
        const events = await store.transaction(async (tx) => {
          const a = await tx.events.append('s', [entry()]);
          await expect(tx.events.append('s', [entry(), draft(), entry({ id: first!.id })])).rejects.toThrow();
          await expect(tx.events.append('s', [entry()], { expectLastSeq: 99 })).rejects.toBeInstanceOf(
            SeqConflictError,
          );
          const b = await tx.events.append('s', [entry()]);
          return [...a, ...b];
        });
        expect(seqs(events)).toEqual([2, 3]);
        expect(events[1]!.parentId).toBe(events[0]!.id);
        expect(await store.events.read('s')).toEqual([first, ...events]);
        expect(await store.sessions.get('s')).toMatchObject({ lastSeq: 3, leafId: events[1]!.id });
      });

      it('others never see the writes of a transaction that rolls back', async () => {
        await session('s');
        const inside = gate();
        const release = gate();
        const outcome = store.transaction(async (tx) => {
          await tx.events.append('s', [entry(), entry()]);
          inside.open();
          await release.promise;
          throw new Error('rolled back');
        });
        await inside.promise;
        const read = store.events.read('s');
        const got = store.sessions.get('s');
        release.open();
        await expect(outcome).rejects.toThrow('rolled back');
        expect(await read).toEqual([]);
        expect((await got)!.lastSeq).toBe(0);
      });

      it('appends from outside wait for or follow a transaction without breaking seqs', async () => {
        await session('s');
        const inside = gate();
        const release = gate();
        const outcome = store.transaction(async (tx) => {
          const r = await tx.events.append('s', [entry(), draft()]);
          inside.open();
          await release.promise;
          return r;
        });
        await inside.promise;
        const outside = store.events.append('s', [entry()]);
        release.open();
        const [txEvents, outEvents] = await Promise.all([outcome, outside]);
        const all = await store.events.read('s');
        expect(seqs(all)).toEqual([1, 2, 3]);
        expect(all).toEqual([...txEvents, ...outEvents].sort(bySeq));
        const entries = all.filter((e) => e.entry);
        expect(entries[1]!.parentId).toBe(entries[0]!.id);
      });
    });

    describe('concurrency', () => {
      it('a concurrent write that fails does not take the others with it', async () => {
        await session('s');
        const [first] = await store.events.append('s', [entry()]);
        const outcomes = await Promise.allSettled([
          store.events.append('s', [entry({ data: { n: 1 } })]),
          store.events.append('s', [entry({ id: first!.id })]),
          store.events.append('s', [entry({ data: { n: 2 } }), draft()]),
          store.events.append('s', [entry()], { expectLastSeq: 0 }),
          store.events.append('s', [entry({ data: { n: 3 } })]),
        ]);
        expect(outcomes.map((o) => o.status)).toEqual(['fulfilled', 'rejected', 'fulfilled', 'rejected', 'fulfilled']);
        expect((outcomes[1] as PromiseRejectedResult).reason).toMatchObject({ code: 'conflict' });
        expect((outcomes[3] as PromiseRejectedResult).reason).toBeInstanceOf(SeqConflictError);
        const all = await store.events.read('s');
        expect(seqs(all)).toEqual(range(1, 5));
        // Concurrent calls commit in some order (a pooled backend runs them on several connections).
        expect(all[0]!.data).toEqual(first!.data);
        expect(all.slice(1).map((e) => e.data)).toEqual(expect.arrayContaining([{ n: 1 }, { n: 2 }, { n: 3 }]));
        const two = all.findIndex((e) => (e.data as { n?: number }).n === 2 && e.entry);
        expect(all[two + 1]!.entry).toBe(false);
        expect((await store.sessions.get('s'))!.lastSeq).toBe(5);
      });

      it('concurrent appends to one session get contiguous seqs and a linear entry chain', async () => {
        await session('s');
        const results = await Promise.all(
          range(1, 50).map((i) => store.events.append('s', [entry({ data: { i } }), draft({ data: { i } })])),
        );
        for (const batch of results) {
          expect(batch).toHaveLength(2);
          expect(batch[1]!.seq).toBe(batch[0]!.seq + 1);
          expect(batch[0]!.seq % 2).toBe(1);
        }
        const all = await store.events.read('s');
        expect(seqs(all)).toEqual(range(1, 100));
        expect(all).toEqual(results.flat().sort(bySeq));

        const entries = all.filter((e) => e.entry);
        expect(entries).toHaveLength(50);
        expect(entries[0]!.parentId).toBeUndefined();
        for (let i = 1; i < entries.length; i++) expect(entries[i]!.parentId).toBe(entries[i - 1]!.id);
        expect(all.filter((e) => !e.entry).every((e) => e.parentId === undefined)).toBe(true);

        expect(await store.sessions.get('s')).toMatchObject({ lastSeq: 100, leafId: entries.at(-1)!.id });
        expect(ids(await store.events.ancestors('s', entries.at(-1)!.id, 1000))).toEqual(ids(entries).reverse());
      });

      it('concurrent appends to different sessions do not disturb each other', async () => {
        const names = ['a', 'b', 'c'];
        for (const n of names) await session(n);
        await Promise.all(range(1, 30).map((i) => store.events.append(names[i % 3]!, [entry({ data: i })])));
        for (const n of names) {
          const all = await store.events.read(n);
          expect(seqs(all)).toEqual(range(1, 10));
          for (let i = 1; i < all.length; i++) expect(all[i]!.parentId).toBe(all[i - 1]!.id);
        }
      });
    });

    describe('tenants, api keys and idempotency records', () => {
      it("lists only one tenant's sessions when asked", async () => {
        await store.sessions.create({ id: 'a1', createdAt: T0, tenant: 'acme' });
        await store.sessions.create({ id: 'b1', createdAt: T0, tenant: 'beta' });
        await store.sessions.create({ id: 'a2', createdAt: T0, tenant: 'acme' });
        expect((await store.sessions.list({ limit: 10, tenant: 'acme' })).map((s) => s.id)).toEqual(['a1', 'a2']);
        expect((await store.sessions.list({ limit: 10 })).map((s) => s.id)).toEqual(['a1', 'a2', 'b1']);
      });

      it('stores api keys by hash, finds, lists and revokes them', async () => {
        const key = {
          id: 'k1',
          tenant: 'acme',
          name: 'ci',
          hash: 'h1',
          prefix: 'keel_ab',
          ratePerMinute: 60,
          createdAt: T0,
          revokedAt: null,
          scope: 'tenant' as const,
          quotas: null,
        };
        await store.keys.create(key);
        await store.keys.create({ ...key, id: 'k2', tenant: 'beta', hash: 'h2', ratePerMinute: null });
        expect(await store.keys.find('h1')).toEqual(key);
        expect(await store.keys.find('nope')).toBeUndefined();
        expect((await store.keys.list('acme')).map((k) => k.id)).toEqual(['k1']);
        expect((await store.keys.list()).map((k) => k.id)).toEqual(['k1', 'k2']);
        await expect(store.keys.create({ ...key, id: 'k3' })).rejects.toMatchObject({ code: 'conflict' });
        expect(await store.keys.revoke('k1', T0 + 1)).toBe(true);
        expect(await store.keys.revoke('k1', T0 + 2)).toBe(true);
        expect((await store.keys.find('h1'))!.revokedAt).toBe(T0 + 1);
        expect(await store.keys.revoke('ghost', T0)).toBe(false);
      });

      it('keeps the first idempotency record for a key and prunes old ones', async () => {
        const first = { tenant: 'acme', key: 'k', fingerprint: 'f1', status: 202, body: '{"a":1}', createdAt: T0 };
        expect(await store.idempotency.put(first)).toEqual(first);
        expect(await store.idempotency.put({ ...first, fingerprint: 'f2', body: '{}', createdAt: T0 + 5 })).toEqual(
          first,
        );
        expect(await store.idempotency.get('acme', 'k')).toEqual(first);
        expect(await store.idempotency.get('beta', 'k')).toBeUndefined();
        await store.idempotency.put({ ...first, key: 'new', createdAt: T0 + 100 });
        expect(await store.idempotency.prune(T0 + 50)).toBe(1);
        expect(await store.idempotency.get('acme', 'k')).toBeUndefined();
        expect(await store.idempotency.get('acme', 'new')).toBeDefined();
      });

      it('completes an idempotency record of an effect (status 0) with its response, once, and only for the same request', async () => {
        const effect = {
          tenant: 'acme',
          key: 'e',
          fingerprint: 'f1',
          status: 0,
          body: '{"run_id":"r1"}',
          createdAt: T0,
        };
        expect(await store.idempotency.put(effect)).toEqual(effect);
        expect(await store.idempotency.put({ ...effect, status: 0, body: '{"run_id":"r2"}' })).toEqual(effect);
        expect(await store.idempotency.put({ ...effect, fingerprint: 'other', status: 202, body: '{}' })).toEqual(
          effect,
        );
        const response = { ...effect, status: 202, body: '{"run":{"id":"r1"}}', createdAt: T0 + 9 };
        expect(await store.idempotency.put(response)).toEqual({ ...response, createdAt: T0 });
        expect(await store.idempotency.put({ ...response, body: '{"later":true}' })).toEqual({
          ...response,
          createdAt: T0,
        });
        expect(await store.idempotency.get('acme', 'e')).toEqual({ ...response, createdAt: T0 });
      });
    });

    describe('close', () => {
      it('lets operations started before close() finish', async () => {
        await session('s');
        const pending = store.events.append('s', [entry()]);
        const closing = store.close();
        expect(seqs(await pending)).toEqual([1]);
        await closing;
      });

      it('rejects every operation after close(), and closing again is harmless', async () => {
        await session('s');
        await store.close();
        await store.close();
        await expect(store.sessions.get('s')).rejects.toThrow();
        await expect(store.sessions.create({ id: 't', createdAt: T0 })).rejects.toThrow();
        await expect(store.sessions.list({ limit: 10 })).rejects.toThrow();
        await expect(store.sessions.update('s', { title: 'x' })).rejects.toThrow();
        await expect(store.events.append('s', [entry()])).rejects.toThrow();
        await expect(store.events.read('s')).rejects.toThrow();
        await expect(store.events.entries('s', ['x'])).rejects.toThrow();
        await expect(store.events.ancestors('s', 'x', 10)).rejects.toThrow();
        await expect(store.events.seal('s')).rejects.toThrow();
        await expect(store.events.putBlobs([{ hash: 'h', data: 'd' }])).rejects.toThrow();
        await expect(store.events.getBlobs(['h'])).rejects.toThrow();
        await expect(
          store.events.putSnapshot({ sessionId: 's', projection: 'p', version: 1, asOfSeq: 0, leafId: null, state: 0 }),
        ).rejects.toThrow();
        await expect(store.events.getSnapshot('s', 'p', 1)).rejects.toThrow();
        await expect(store.transaction(async () => 1)).rejects.toThrow();
      });
    });
  });
}
