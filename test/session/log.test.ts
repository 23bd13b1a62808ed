import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  defineAgent,
  InvalidEventError,
  openSqliteStore,
  ScriptedModel,
  Sessions,
  SessionLog,
  SqliteStore,
  type LiveListener,
  type NewEvent,
  type SessionEvent,
  type Store,
} from '../../src/index.ts';

const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;
/** The Unix milliseconds a UUIDv7 carries in its first 48 bits. */
const msOf = (id: string) => parseInt(id.replace(/-/g, '').slice(0, 12), 16);

const usage0 = { inputTokens: 0, outputTokens: 0, cachedInputTokens: 0, reasoningTokens: 0 };
const assistant = (id: string, text: string): NewEvent => ({
  type: 'assistant/message',
  data: {
    message: { id, role: 'assistant', content: [{ type: 'text', text }] },
    finishReason: 'stop',
    usage: usage0,
    cost: 0,
    timing: { startedAt: 0, durationMs: 1 },
  },
});
const user = (id: string, text: string): NewEvent => ({
  type: 'user/message',
  data: { message: { id, role: 'user', content: [{ type: 'text', text }] }, via: 'input' },
});

describe('session log', () => {
  let dir: string;
  let path: string;
  let store: Store;
  let sessions: Sessions;

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-log-'));
    path = join(dir, 'keel.db');
    store = openSqliteStore({ path, synchronous: 'OFF' });
    sessions = new Sessions({ store });
  });
  afterEach(async () => {
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });

  describe('a new session', () => {
    it('refuses an id it could not be named by: empty, too long, or not a string', async () => {
      for (const id of ['', 'x'.repeat(201), 5]) {
        await expect(sessions.create({ id: id as never }), JSON.stringify(id)).rejects.toMatchObject({
          code: 'validation',
          message: expect.stringMatching(/^id: /),
        });
      }
      expect(await store.sessions.list({ limit: 10 })).toEqual([]);
      expect((await sessions.create({ id: 'x'.repeat(200) })).id).toHaveLength(200);
    });
  });

  describe('envelope', () => {
    it('refuses an entry whose given id the session has, also one the log minted (its own appends skip that lookup)', async () => {
      const s = await sessions.create({ title: 't' });
      const [minted] = await sessions.append(s.id, [user('u1', 'hello')]);
      expect(minted!.id).toMatch(UUID_V7);
      // In an open row and, once sealed, in the entries index: refused either way.
      await expect(sessions.append(s.id, [{ ...user('u2', 'again'), id: minted!.id }])).rejects.toMatchObject({
        code: 'conflict',
      });
      await store.events.seal(s.id);
      await expect(sessions.append(s.id, [{ ...user('u3', 'again'), id: minted!.id }])).rejects.toMatchObject({
        code: 'conflict',
      });
      // Minted ids never collide: many appends, every entry kept.
      for (let i = 0; i < 50; i++) await sessions.append(s.id, [user(`m${i}`, 'x')]);
      const entries = (await sessions.events(s.id)).filter((e) => e.entry);
      expect(entries).toHaveLength(51);
      expect(new Set(entries.map((e) => e.id)).size).toBe(51);
    });

    it('gives every event an id, its session, a gapless seq, type, version and time, plus run/turn/step when given', async () => {
      const before = Date.now();
      const s = await sessions.create({ title: 't' });
      const appended = await sessions.append(s.id, [
        {
          type: 'turn/start',
          runId: 'run-1',
          turn: 1,
          data: { agent: { name: 'a', version: '1' }, model: { provider: 'p', modelId: 'm' }, resumed: false },
        },
        user('u1', 'hello'),
        { type: 'step/start', runId: 'run-1', turn: 1, step: 1, data: {} },
        { ...assistant('a1', 'hi'), runId: 'run-1', turn: 1, step: 1 },
        { type: 'step/end', turn: 1, step: 1, time: 1234, data: { reason: 'final', usage: usage0 } },
      ]);
      const after = Date.now();
      const all = await sessions.events(s.id);

      // What append returned is exactly what a reader gets back.
      expect(all.slice(1)).toEqual(appended);
      expect(all.map((e) => e.seq)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(all.map((e) => e.type)).toEqual([
        'session/created',
        'turn/start',
        'user/message',
        'step/start',
        'assistant/message',
        'step/end',
      ]);
      for (const e of all) {
        expect(e.sessionId).toBe(s.id);
        expect(e.v).toBe(1);
        expect(e.id).toMatch(UUID_V7);
      }
      expect(new Set(all.map((e) => e.id)).size).toBe(all.length);

      // Default time is the append time; an explicit time is kept as given.
      for (const e of all.slice(0, 5)) {
        expect(e.time).toBeGreaterThanOrEqual(before);
        expect(e.time).toBeLessThanOrEqual(after);
        // Time-sortable: the id carries the millisecond it was minted in.
        expect(msOf(e.id)).toBeGreaterThanOrEqual(before);
        expect(msOf(e.id)).toBeLessThanOrEqual(after);
      }
      expect(all[5]!.time).toBe(1234);
      const idMs = all.map((e) => msOf(e.id));
      expect(idMs).toEqual([...idMs].sort((a, b) => a - b));

      const [created, turnStart, u, stepStart, a, stepEnd] = all as [
        SessionEvent,
        SessionEvent,
        SessionEvent,
        SessionEvent,
        SessionEvent,
        SessionEvent,
      ];
      expect(created).not.toHaveProperty('runId');
      expect(created).not.toHaveProperty('turn');
      expect(turnStart).toMatchObject({ runId: 'run-1', turn: 1, entry: false });
      expect(turnStart).not.toHaveProperty('step');
      expect(u).not.toHaveProperty('runId');
      expect(stepStart).toMatchObject({ runId: 'run-1', turn: 1, step: 1 });
      expect(stepEnd).toMatchObject({ turn: 1, step: 1 });
      expect(stepEnd).not.toHaveProperty('runId');

      // Entries thread into the tree: the first is a root, the next hangs under it; non-entries have no parent.
      expect(u.entry).toBe(true);
      expect(u).not.toHaveProperty('parentId');
      expect(a).toMatchObject({ entry: true, parentId: u.id });
      for (const e of [created, turnStart, stepStart, stepEnd]) {
        expect(e.entry).toBe(false);
        expect(e).not.toHaveProperty('parentId');
      }
      const session = await sessions.get(s.id);
      expect(session.lastSeq).toBe(6);
      expect(session.leafId).toBe(a.id);
    });

    it('keeps seqs per session and attaches an entry under an explicit parent when asked', async () => {
      const s1 = await sessions.create();
      const s2 = await sessions.create();
      const [u1] = await sessions.append(s1.id, [user('u1', 'one')]);
      await sessions.append(s2.id, [user('x', 'other'), user('y', 'other')]);
      const [a1, u2] = await sessions.append(s1.id, [
        assistant('a1', 'two'),
        { ...user('u2', 'root again'), parentId: null },
      ]);
      const [u3] = await sessions.append(s1.id, [{ ...user('u3', 'under u1'), parentId: u1!.id }]);

      expect((await sessions.events(s1.id)).map((e) => e.seq)).toEqual([1, 2, 3, 4, 5]);
      expect((await sessions.events(s2.id)).map((e) => e.seq)).toEqual([1, 2, 3]);
      expect(a1!.parentId).toBe(u1!.id);
      expect(u2).not.toHaveProperty('parentId');
      expect(u3!.parentId).toBe(u1!.id);
      expect((await sessions.get(s1.id)).leafId).toBe(u3!.id);
    });
  });

  describe('validation', () => {
    it('refuses invalid data with InvalidEventError and writes nothing', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('u1', 'ok')]);
      const before = await sessions.get(s.id);

      const bad = {
        type: 'user/message',
        data: { message: { id: 'u2', role: 'assistant', content: [] }, via: 'input' },
      } as unknown as NewEvent;
      const err = await sessions.append(s.id, [bad]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidEventError);
      expect((err as InvalidEventError).code).toBe('invalid_event');
      expect((err as InvalidEventError).message).toMatch(/invalid user\/message event data/);
      expect((err as InvalidEventError).issues).toMatch(/role/);

      // Extra fields are refused too (the schemas are strict).
      const extra = { type: 'step/start', data: { sneaky: 1 } } as unknown as NewEvent;
      await expect(sessions.append(s.id, [extra])).rejects.toBeInstanceOf(InvalidEventError);

      const after = await sessions.get(s.id);
      expect(after.lastSeq).toBe(before.lastSeq);
      expect(after.leafId).toBe(before.leafId);
      expect(await sessions.events(s.id)).toHaveLength(before.lastSeq);
    });

    it('refuses an event type it does not know', async () => {
      const s = await sessions.create();
      const unknown = { type: 'mystery/event', data: {} } as unknown as NewEvent;
      const err = await sessions.append(s.id, [unknown]).catch((e: unknown) => e);
      expect(err).toBeInstanceOf(InvalidEventError);
      expect((err as Error).message).toMatch(/mystery\/event.*unknown event type/);
      expect((await sessions.get(s.id)).lastSeq).toBe(1);
    });

    it('writes nothing of a batch in which one event is invalid', async () => {
      const s = await sessions.create();
      const big = 'x'.repeat(4000);
      const bad = {
        type: 'tool/result',
        data: {
          toolCallId: 'c',
          toolName: 't',
          output: { type: 'text', value: 1 },
          toolMessageId: 't1',
          durationMs: 0,
        },
      } as unknown as NewEvent;
      const batch: NewEvent[] = [
        user('u1', 'first'),
        // A large payload whose blob would be written first if the batch were not atomic.
        {
          type: 'tool/result',
          data: {
            toolCallId: 'c0',
            toolName: 't',
            output: { type: 'text', value: big },
            toolMessageId: 't0',
            durationMs: 0,
          },
        },
        assistant('a1', 'second'),
        bad,
      ];
      await expect(sessions.append(s.id, batch)).rejects.toBeInstanceOf(InvalidEventError);
      const after = await sessions.get(s.id);
      expect(after.lastSeq).toBe(1);
      expect(after.leafId).toBeNull();
      expect((await sessions.events(s.id)).map((e) => e.type)).toEqual(['session/created']);
      const raw = new Database(path, { readonly: true });
      try {
        expect(raw.prepare('SELECT count(*) AS n FROM blobs').get()).toEqual({ n: 0 });
      } finally {
        raw.close();
      }
    });

    it('writes nothing of a batch the store refuses half way (a duplicate id)', async () => {
      const s = await sessions.create();
      const [u1] = await sessions.append(s.id, [user('u1', 'first')]);
      const dup = { ...assistant('a2', 'dup'), id: u1!.id };
      await expect(sessions.append(s.id, [assistant('a1', 'fine'), dup])).rejects.toThrow();
      const after = await sessions.get(s.id);
      expect(after.lastSeq).toBe(2);
      expect(after.leafId).toBe(u1!.id);
      expect(await sessions.events(s.id)).toHaveLength(2);
    });

    it('refuses an append that expected another last seq', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('u1', 'one')], { expectLastSeq: 1 });
      await expect(sessions.append(s.id, [user('u2', 'two')], { expectLastSeq: 1 })).rejects.toMatchObject({
        code: 'seq_conflict',
      });
      expect((await sessions.get(s.id)).lastSeq).toBe(2);
    });
  });

  describe('immutability', () => {
    it('offers no way to change or remove an event through the store, the log or the facade', () => {
      const methods = (proto: object) => Object.getOwnPropertyNames(proto).filter((n) => n !== 'constructor');
      const changes = /delete|remove|rewrite|truncate|edit|replace|purge|prune|clear|^set|update|put/i;
      const aboutEvents = /event|entr|log|seq/i;
      for (const proto of [SqliteStore.prototype, SessionLog.prototype, Sessions.prototype]) {
        expect(methods(proto).filter((n) => changes.test(n) && aboutEvents.test(n))).toEqual([]);
      }
      // The store's operations are in namespaces: none outside `events` is about events, and what
      // `events` has for them only reads or appends (blobs and snapshots aside, which are not the log).
      // (events.seal re-encodes what is stored and changes nothing that can be read: see the store contract.)
      const store = new SqliteStore({ path: ':memory:' });
      try {
        const spaces = Object.entries(store).filter(
          ([, v]) => typeof v === 'object' && v !== null && Object.values(v).every((f) => typeof f === 'function'),
        ) as Array<[string, Record<string, unknown>]>;
        expect(spaces.map(([ns]) => ns)).toContain('events');
        for (const [ns, ops] of spaces) {
          if (ns === 'events') continue;
          expect(Object.keys(ops).filter((n) => changes.test(n) && aboutEvents.test(n))).toEqual([]);
        }
        const eventOps = Object.keys(store.events).filter((n) => !/Blobs?|blob|Snapshot/.test(n));
        expect(eventOps.sort()).toEqual(['ancestors', 'append', 'entries', 'read', 'seal']);
      } finally {
        void store.close();
      }
      // The log's only write is append; the facade's only "update" is the session's title and metadata.
      expect(methods(SessionLog.prototype).filter((n) => changes.test(n))).toEqual([]);
      expect(methods(Sessions.prototype).filter((n) => changes.test(n))).toEqual(['update']);
    });

    it('records a metadata update as a new event and leaves the earlier ones untouched', async () => {
      const s = await sessions.create({ title: 'before' });
      await sessions.update(s.id, { title: 'after' });
      const events = await sessions.events(s.id);
      expect(events.map((e) => e.type)).toEqual(['session/created', 'session/updated']);
      expect(events[0]!.data).toMatchObject({ title: 'before' });
      expect(events[1]!.data).toEqual({ title: 'after' });
      expect((await sessions.get(s.id)).title).toBe('after');
    });

    it('refuses a raw UPDATE or DELETE of an event in the database itself', async () => {
      const s = await sessions.create();
      await sessions.append(s.id, [user('u1', 'keep me')]);
      const raw = new Database(path);
      try {
        // Stored in batches (ADR-0009).
        expect(() => raw.prepare("UPDATE event_batches SET data = x'00'").run()).toThrow(/events are immutable/);
        expect(() => raw.prepare('DELETE FROM event_batches').run()).toThrow(/events are immutable/);
        expect(raw.prepare('SELECT count(*) AS n, max(last_seq) AS last FROM event_batches').get()).toEqual({
          n: 2,
          last: 2,
        });
      } finally {
        raw.close();
      }
      // Sealed, the tree is indexed in entries (ADR-0022), as immutable.
      await store.events.seal(s.id);
      const before = await store.events.read(s.id);
      const sealed = new Database(path);
      try {
        expect(sealed.prepare('SELECT count(*) AS n FROM entries').get()).toEqual({ n: 1 });
        expect(() => sealed.prepare('UPDATE entries SET parent_id = NULL').run()).toThrow(/events are immutable/);
        expect(() => sealed.prepare('DELETE FROM entries').run()).toThrow(/events are immutable/);
        expect(() => sealed.prepare('DELETE FROM event_batches').run()).toThrow(/events are immutable/);
      } finally {
        sealed.close();
      }
      expect(await store.events.read(s.id)).toEqual(before);
    });
  });

  describe('reading', () => {
    it('reads events in pages with after/limit (and until) that add up to the whole log', async () => {
      const s = await sessions.create();
      const batch: NewEvent[] = Array.from({ length: 24 }, (_, i) =>
        i % 2 === 0 ? user(`u${i}`, `m${i}`) : assistant(`a${i}`, `m${i}`),
      );
      await sessions.append(s.id, batch);
      const all = await sessions.events(s.id);
      expect(all.map((e) => e.seq)).toEqual(Array.from({ length: 25 }, (_, i) => i + 1));

      const paged: SessionEvent[] = [];
      for (let after = 0; ;) {
        const page = await sessions.events(s.id, { after, limit: 7 });
        if (page.length === 0) break;
        expect(page.length).toBeLessThanOrEqual(7);
        expect(page[0]!.seq).toBe(after + 1);
        paged.push(...page);
        after = page.at(-1)!.seq;
      }
      expect(paged).toEqual(all);
      expect(await sessions.events(s.id, { after: 25 })).toEqual([]);
      expect((await sessions.events(s.id, { after: 10, limit: 3 })).map((e) => e.seq)).toEqual([11, 12, 13]);
      expect((await sessions.log.read(s.id, { afterSeq: 3, untilSeq: 6 })).map((e) => e.seq)).toEqual([4, 5, 6]);
    });

    it('returns at most 1000 events a page by default', async () => {
      const s = await sessions.create();
      await sessions.append(
        s.id,
        Array.from({ length: 1100 }, (): NewEvent => ({ type: 'step/start', data: {} })),
      );
      const first = await sessions.events(s.id);
      expect(first).toHaveLength(1000);
      const rest = await sessions.events(s.id, { after: first.at(-1)!.seq });
      expect(rest.map((e) => e.seq)).toEqual(Array.from({ length: 101 }, (_, i) => 1001 + i));
    });
  });

  describe('live subscribe', () => {
    it('delivers appended events in seq order, only for its session, until unsubscribed', async () => {
      const s = await sessions.create();
      const other = await sessions.create();
      const got: SessionEvent[] = [];
      const deltas: unknown[] = [];
      const unsubscribe = sessions.subscribe(s.id, (m) =>
        m.kind === 'event' ? got.push(m.event) : m.kind === 'delta' ? deltas.push(m.delta) : undefined,
      );

      await sessions.append(s.id, [user('u1', 'one')]);
      await sessions.append(other.id, [user('x', 'elsewhere')]);
      await sessions.append(s.id, [assistant('a1', 'two'), user('u2', 'three'), { type: 'step/start', data: {} }]);
      sessions.log.publishDelta(s.id, { type: 'text/delta', turn: 1, step: 1, messageId: 'm', delta: 'hi' });
      await sessions.update(s.id, { title: 'renamed' });

      expect(got.map((e) => e.seq)).toEqual([2, 3, 4, 5, 6]);
      expect(got).toEqual((await sessions.events(s.id)).slice(1));
      expect(deltas).toEqual([{ type: 'text/delta', turn: 1, step: 1, messageId: 'm', delta: 'hi' }]);

      unsubscribe();
      await sessions.append(s.id, [user('u3', 'unheard')]);
      expect(got).toHaveLength(5);
    });

    it('tells nothing about an append whose transaction rolled back', async () => {
      const s = await sessions.create();
      const got: SessionEvent[] = [];
      sessions.subscribe(s.id, (m) => {
        if (m.kind === 'event') got.push(m.event);
      });
      await expect(
        sessions.log.transaction(async (tx) => {
          await sessions.log.append(s.id, [user('u1', 'doomed')], { tx });
          throw new Error('abort');
        }),
      ).rejects.toThrow('abort');
      expect(got).toEqual([]);
      expect((await sessions.get(s.id)).lastSeq).toBe(1);
      // Appending in a bare store transaction is refused: its events could not be published on commit.
      await expect(
        store.transaction((tx) => sessions.log.append(s.id, [user('u2', 'unpublished')], { tx })),
      ).rejects.toThrow(/log.transaction/);
      // Committed, they are told once, after the commit.
      const committed = sessions.log.transaction(async (tx) => {
        await sessions.log.append(s.id, [user('u3', 'told')], { tx });
        expect(got).toEqual([]);
      });
      await committed;
      expect(got.map((e) => e.type)).toEqual(['user/message']);
    });

    it('streams a whole turn live, in the order the log stores it', async () => {
      const s = await sessions.create();
      const seen: Array<Parameters<LiveListener>[0]> = [];
      sessions.subscribe(s.id, (m) => seen.push(m));
      const agent = defineAgent({ name: 'live', model: new ScriptedModel([{ text: 'hello there world' }]) });
      const result = await (await sessions.startTurn(s.id, agent, { input: 'hi' })).result;
      expect(result.reason).toBe('completed');

      const events = seen.flatMap((m) => (m.kind === 'event' ? [m.event] : []));
      expect(events).toEqual((await sessions.events(s.id)).slice(1));
      expect(events.map((e) => e.type)).toEqual([
        'turn/start',
        'user/message',
        'step/start',
        'request/header',
        'assistant/message',
        'step/end',
        'turn/end',
      ]);
      // Deltas stream before the step's durable events, which are published when the step
      // commits (here with the turn's end: one commit for the whole final step), and are never stored.
      // (`changed`: the store's notices of the commits, this process's own included on a file, as on PostgreSQL.)
      const kinds = seen.map((m) => (m.kind === 'event' ? m.event.type : m.kind));
      expect(kinds.indexOf('delta')).toBe(0);
      expect(kinds.lastIndexOf('delta')).toBeLessThan(kinds.indexOf('turn/start'));
    });
  });
});
