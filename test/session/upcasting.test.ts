import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  contextProjection,
  defaultRegistry,
  developerProjection,
  EventRegistry,
  InvalidEventError,
  newId,
  openSqliteStore,
  readProjection,
  Sessions,
  statsProjection,
  transcriptProjection,
  UnknownEventError,
  type EventDraft,
  type NewEvent,
  type Projection,
  type Store,
} from '../../src/index.ts';

/** A test event type at v2: v1 had `{ body }`, v2 has `{ text, tags }`. */
const noteV2 = z.strictObject({ text: z.string(), tags: z.array(z.string()) });
const noteType = {
  type: 'test/note',
  v: 2,
  schema: noteV2,
  entry: false,
  upcasters: { 1: (d: unknown) => ({ text: (d as { body: string }).body, tags: ['from-v1'] }) },
};

const user = (text: string): NewEvent => ({
  type: 'user/message',
  data: { message: { id: newId(), role: 'user', content: [{ type: 'text', text }] }, via: 'input' },
});

const raw = (type: string, v: number, data: unknown, extra: Partial<EventDraft> = {}): EventDraft => ({
  id: newId(),
  type,
  v,
  time: Date.now(),
  entry: false,
  data,
  ...extra,
});

const projections: Projection<unknown>[] = [
  contextProjection,
  transcriptProjection,
  developerProjection,
  statsProjection,
] as Projection<unknown>[];

describe('upcasting and unknown events', () => {
  let store: Store;
  let sessions: Sessions;

  beforeEach(() => {
    store = openSqliteStore({ path: ':memory:' });
    sessions = new Sessions({ store, registry: defaultRegistry().define(noteType), snapshotEvery: 1 });
  });
  afterEach(() => store.close());

  describe('upcasters', () => {
    it('reads a v1 event written by an older Keel in the current v2 shape', async () => {
      const s = await sessions.create();
      await store.events.append(s.id, [raw('test/note', 1, { body: 'written long ago' })]);
      await sessions.append(s.id, [
        { type: 'test/note', data: { text: 'written now', tags: ['new'] } } as unknown as NewEvent,
      ]);

      const events = await sessions.log.read(s.id);
      const notes = events.filter((e) => (e.type as string) === 'test/note');
      expect(notes.map((e) => ({ v: e.v, data: e.data }))).toEqual([
        { v: 2, data: { text: 'written long ago', tags: ['from-v1'] } },
        { v: 2, data: { text: 'written now', tags: ['new'] } },
      ]);
      // The stored row keeps what was written: upcasting happens on the way out only.
      const stored = await store.events.read(s.id);
      expect(stored[1]).toMatchObject({ v: 1, data: { body: 'written long ago' } });
      expect(stored[2]).toMatchObject({ v: 2, data: { text: 'written now', tags: ['new'] } });

      // Projections see the upgraded shape too (developer lists session-level events with their data).
      const dev = await sessions.developerView(s.id);
      expect(dev.session.filter((x) => x.type === 'test/note').map((x) => x.data)).toEqual([
        { text: 'written long ago', tags: ['from-v1'] },
        { text: 'written now', tags: ['new'] },
      ]);
    });

    it('chains upcasters across several versions, in order', async () => {
      const registry = defaultRegistry().define({
        type: 'test/chain',
        v: 3,
        schema: z.strictObject({ trail: z.array(z.string()) }),
        entry: false,
        upcasters: {
          1: (d: unknown) => ({ trail: [(d as { s: string }).s, 'v1->v2'] }),
          2: (d: unknown) => ({ trail: [...(d as { trail: string[] }).trail, 'v2->v3'] }),
        },
      });
      const chained = new Sessions({ store, registry });
      const s = await chained.create();
      await store.events.append(s.id, [
        raw('test/chain', 1, { s: 'one' }),
        raw('test/chain', 2, { trail: ['two'] }),
        raw('test/chain', 3, { trail: ['three'] }),
      ]);
      const events = (await chained.log.read(s.id)).slice(1);
      expect(events.map((e) => e.data)).toEqual([
        { trail: ['one', 'v1->v2', 'v2->v3'] },
        { trail: ['two', 'v2->v3'] },
        { trail: ['three'] },
      ]);
      expect(events.every((e) => e.v === 3)).toBe(true);
    });

    it('refuses to define a version without an upcaster from every older one', () => {
      const r = defaultRegistry();
      expect(() =>
        r.define({ type: 'test/gap', v: 3, schema: z.object({}), entry: false, upcasters: { 1: (d: unknown) => d } }),
      ).toThrow(/test\/gap: no upcaster from v2 to v3/);
      expect(() => r.define({ type: 'test/none', v: 2, schema: z.object({}), entry: false })).toThrow(
        /no upcaster from v1 to v2/,
      );
      expect(() => r.define({ type: 'test/zero', v: 0, schema: z.object({}), entry: false })).toThrow(
        /version must be >= 1/,
      );
      expect(r.get('test/gap')).toBeUndefined();
      expect(r.get('test/none')).toBeUndefined();
    });

    it('refuses an old event the upcasters cannot bring to a valid current shape', async () => {
      const s = await sessions.create();
      await store.events.append(s.id, [raw('test/note', 1, { nobody: true })]);
      const err = await sessions.log.read(s.id).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidEventError);
      expect((err as Error).message).toMatch(/test\/note.*#2/);
    });

    it('writes the current version and validates against it', async () => {
      const s = await sessions.create();
      await expect(
        sessions.append(s.id, [{ type: 'test/note', data: { body: 'v1 shape' } } as unknown as NewEvent]),
      ).rejects.toBeInstanceOf(InvalidEventError);
      const [e] = await sessions.append(s.id, [
        { type: 'test/note', data: { text: 'x', tags: [] } } as unknown as NewEvent,
      ]);
      expect(e!.v).toBe(2);
      expect((await store.events.read(s.id)).at(-1)!.v).toBe(2);
    });
  });

  describe('unknown types', () => {
    const expectUnknown = async (p: Promise<unknown>, type: string, v: number, seq: number) => {
      const err = await p.then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(err).toBeInstanceOf(UnknownEventError);
      expect((err as UnknownEventError).code).toBe('unknown_event');
      expect((err as Error).message).toBe(
        `event #${seq} has type ${type} v${v}, which this Keel does not know and which is not marked ignorable: upgrade Keel to read this session`,
      );
    };

    it('makes reads and log projections fail with a clear UnknownEventError when not ignorable', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('before')]);
      await store.events.append(s.id, [raw('future/thing', 1, { whatever: 1 })]);
      await sessions.append(s.id, [user('after')]);

      await expectUnknown(sessions.log.read(s.id), 'future/thing', 1, 3);
      await expectUnknown(sessions.events(s.id), 'future/thing', 1, 3);
      // Pages that do not include it still read.
      expect((await sessions.events(s.id, { after: 0, limit: 2 })).map((e) => e.seq)).toEqual([1, 2]);
      expect((await sessions.events(s.id, { after: 3 })).map((e) => e.seq)).toEqual([4]);
      for (const p of [developerProjection, statsProjection] as Projection<unknown>[]) {
        await expectUnknown(readProjection(sessions.log, s.id, p, 1), 'future/thing', 1, 3);
      }
      await expectUnknown(sessions.stats(s.id), 'future/thing', 1, 3);
    });

    it('makes path projections fail too when the unknown event is an entry on the path', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('before')]);
      await store.events.append(s.id, [raw('future/entry', 1, {}, { entry: true })]);
      await sessions.append(s.id, [user('after')]);
      for (const p of projections) await expectUnknown(readProjection(sessions.log, s.id, p, 1), 'future/entry', 1, 3);
      await expectUnknown(sessions.context(s.id), 'future/entry', 1, 3);
      await expectUnknown(sessions.transcript(s.id), 'future/entry', 1, 3);
    });

    it('fails a path projection read from a snapshot when the tail holds an unknown event', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('before')]);
      await sessions.context(s.id); // snapshots (snapshotEvery 1)
      await store.events.append(s.id, [raw('future/thing', 1, {})]);
      await expectUnknown(sessions.context(s.id), 'future/thing', 1, 3);
    });

    it('skips an unknown type marked ignorable in reads and every projection', async () => {
      const s = await sessions.create();
      const [u1] = await sessions.append(s.id, [user('before')]);
      await store.events.append(s.id, [raw('future/thing', 1, { whatever: 1 }, { ignorable: true })]);
      const [u2] = await sessions.append(s.id, [user('after')]);

      const events = await sessions.log.read(s.id);
      expect(events.map((e) => e.seq)).toEqual([1, 2, 4]);
      expect(events.map((e) => e.type)).toEqual(['session/created', 'user/message', 'user/message']);

      const plain = new Sessions({ store });
      for (const reader of [sessions, plain]) {
        const stats = await reader.stats(s.id);
        expect(stats.events).toBe(3);
        const dev = await reader.developerView(s.id);
        expect(dev.session.map((x) => x.type)).toEqual(['session/created']);
        expect((await reader.transcript(s.id)).map((x) => x.entryId)).toEqual([u1!.id, u2!.id]);
        expect((await reader.context(s.id)).messages.map((m) => m.role)).toEqual(['user', 'user']);
      }
    });

    it('skips an ignorable unknown entry on the path without losing the entries around it', async () => {
      const s = await sessions.create();
      const [u1] = await sessions.append(s.id, [user('before')]);
      await store.events.append(s.id, [raw('future/entry', 1, {}, { entry: true, ignorable: true })]);
      const [u2] = await sessions.append(s.id, [user('after')]);
      for (const p of projections) await expect(readProjection(sessions.log, s.id, p, 100)).resolves.toBeDefined();
      expect((await sessions.transcript(s.id)).map((x) => x.entryId)).toEqual([u1!.id, u2!.id]);
      const ctx = await readProjection(sessions.log, s.id, contextProjection, 100);
      expect(ctx.state.entryIds).toEqual([u1!.id, u2!.id]);
    });

    it('follows a leaf moved by an ignorable event it cannot read, snapshot or not', async () => {
      const s = await sessions.create();
      const [u1] = await sessions.append(s.id, [user('one')]);
      const [u2] = await sessions.append(s.id, [user('two')]);
      // Snapshots of the path ending at u2 (snapshotEvery 1).
      expect((await sessions.transcript(s.id)).map((x) => x.entryId)).toEqual([u1!.id, u2!.id]);
      expect((await readProjection(sessions.log, s.id, contextProjection, 1)).state.entryIds).toEqual([u1!.id, u2!.id]);

      // A newer Keel's leaf-moving event: this reader skips it, but the leaf did move.
      await store.events.append(s.id, [raw('future/jump', 1, {}, { leaf: u1!.id, ignorable: true })]);
      expect((await sessions.get(s.id)).leafId).toBe(u1!.id);
      for (const p of [transcriptProjection, contextProjection] as Projection<unknown>[]) {
        const read = await readProjection(sessions.log, s.id, p, 1);
        expect(read.leafId).toBe(u1!.id);
      }
      expect((await sessions.transcript(s.id)).map((x) => x.entryId)).toEqual([u1!.id]);
      expect((await readProjection(sessions.log, s.id, contextProjection, 1)).state.entryIds).toEqual([u1!.id]);

      // An unknown ignorable entry starting a new tree moves the leaf away from everything known.
      await store.events.append(s.id, [raw('future/entry', 1, {}, { entry: true, parentId: null, ignorable: true })]);
      expect(await sessions.transcript(s.id)).toEqual([]);
      const [u3] = await sessions.append(s.id, [user('three')]);
      expect((await sessions.transcript(s.id)).map((x) => x.entryId)).toEqual([u3!.id]);
    });

    it('treats a newer version of a known type like an unknown type', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('hi')]);
      // step/start is v1 here; v2 is what a newer Keel would write.
      await store.events.append(s.id, [raw('step/start', 2, { fancy: true })]);
      await expectUnknown(sessions.log.read(s.id), 'step/start', 2, 3);
      await expectUnknown(sessions.stats(s.id), 'step/start', 2, 3);

      await store.events.append(s.id, [raw('test/note', 3, { text: 'x', tags: [], more: 1 }, { ignorable: true })]);
      await store.events.append(s.id, [raw('step/start', 2, { fancy: true }, { ignorable: true })]);
      const tail = await sessions.log.read(s.id, { afterSeq: 3 });
      expect(tail).toEqual([]);
    });

    it('does not know a type the registry lacks, even one the default registry has', async () => {
      const bare = new Sessions({ store, registry: new EventRegistry() });
      const full = new Sessions({ store });
      const s = await full.create();
      await expectUnknown(bare.log.read(s.id), 'session/created', 1, 1);
    });
  });
});
