import { existsSync, mkdtempSync, readdirSync, readlinkSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import { createRuntime, defineAgent, ScriptedModel, tool } from '../../src/index.ts';
import { decodeBatch } from '../../src/store/sqlite/event-batch-codec.ts';
import { EVENT_BATCH_DICTIONARY_1 } from '../../src/store/sqlite/event-batch-dictionary.ts';
import { latestSchemaVersion } from '../../src/store/sqlite/migrations.ts';
import { defaultDbPath, SqliteStore } from '../../src/store/sqlite/store.ts';
import { FencedError, SchemaVersionError, StoreError } from '../../src/store/index.ts';
import { CLAIM_POLICY } from '../../src/runs/lifecycle/run-status.ts';
import { storeContract } from './contract.ts';
import { runsContract } from './runs-contract.ts';
import { tenantsContract } from './tenants-contract.ts';
import { webhooksContract } from './webhooks-contract.ts';
import { schedulesContract } from './schedules-contract.ts';
import { waitsContract } from './waits-contract.ts';
import { limitsContract } from './limits-contract.ts';
import { batchesContract, datasetsContract } from './batches-contract.ts';
import { quotasContract } from './quotas-contract.ts';

/** A store on a fresh file, and more instances on the same file: the nodes of one database. */
const twoInstances = (prefix: string) => async () => {
  const dir = mkdtempSync(join(tmpdir(), prefix));
  const path = join(dir, 'keel.db');
  const stores = [new SqliteStore({ path })];
  return {
    store: stores[0]!,
    another: async () => (stores.push(new SqliteStore({ path })), stores.at(-1)!),
    cleanup: async () => {
      for (const s of stores) await s.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
};

waitsContract('sqlite (file, two instances)', twoInstances('keel-waits-'));
limitsContract('sqlite (file, two instances)', twoInstances('keel-limits-'));
schedulesContract('sqlite (file, two instances)', twoInstances('keel-schedules-'));
webhooksContract('sqlite (file, two instances)', twoInstances('keel-webhooks-'));
datasetsContract('sqlite (file, two instances)', twoInstances('keel-datasets-'));
batchesContract('sqlite (file, two instances)', twoInstances('keel-batches-'));
quotasContract('sqlite (file, two instances)', twoInstances('keel-quotas-'));

const T0 = 1_700_000_000_000;
const DICTIONARY_1_SHA256 = 'c08b55232ad9cecf330e375283cee03d6ad56e1ab7c88ec669c6886122ac78f9';

storeContract('sqlite (file)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-store-'));
  const store = new SqliteStore({ path: join(dir, 'keel.db') });
  return {
    store,
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

// synchronous=NORMAL: the WAL is also synced in the background (WalFlusher, ADR-0020).
storeContract('sqlite (file, synchronous=NORMAL)', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'keel-store-'));
  const store = new SqliteStore({ path: join(dir, 'keel.db'), synchronous: 'NORMAL' });
  return {
    store,
    cleanup: async () => {
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
});

storeContract('sqlite (:memory:)', async () => {
  const store = new SqliteStore({ path: ':memory:' });
  return { store, cleanup: () => store.close() };
});

runsContract('sqlite (file, two instances)', twoInstances('keel-runs-'));

runsContract('sqlite (:memory:)', async () => {
  const store = new SqliteStore({ path: ':memory:' });
  return { store, cleanup: () => store.close() };
});

describe('sqlite store', () => {
  let dir: string;
  let path: string;
  const open: SqliteStore[] = [];
  const raw: Database.Database[] = [];

  const openStore = (options: ConstructorParameters<typeof SqliteStore>[0] = {}) => {
    const s = new SqliteStore({ path, ...options });
    open.push(s);
    return s;
  };
  const rawDb = (options?: Database.Options) => {
    const db = new Database(path, options);
    raw.push(db);
    return db;
  };
  // The connection is private; tests peek at it to check per-connection settings.
  const connection = (s: SqliteStore): Database.Database => s['db'];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-sqlite-'));
    path = join(dir, 'keel.db');
  });

  afterEach(async () => {
    for (const s of open.splice(0)) await s.close();
    for (const db of raw.splice(0)) db.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('runs in WAL mode with synchronous=FULL by default', async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    // journal_mode is persistent in the file: another connection sees it.
    expect(rawDb({ readonly: true }).pragma('journal_mode', { simple: true })).toBe('wal');
    // synchronous, busy_timeout and foreign_keys are per connection: read them on the store's own.
    expect(connection(store).pragma('synchronous', { simple: true })).toBe(2);
    expect(connection(store).pragma('foreign_keys', { simple: true })).toBe(1);
    expect(connection(store).pragma('busy_timeout', { simple: true })).toBe(5000);
  });

  it('applies the synchronous and busyTimeoutMs options', () => {
    const store = openStore({ synchronous: 'NORMAL', busyTimeoutMs: 1234 });
    expect(connection(store).pragma('synchronous', { simple: true })).toBe(1);
    expect(connection(store).pragma('busy_timeout', { simple: true })).toBe(1234);
  });

  it('with synchronous=NORMAL syncs the WAL in the background every 32 commits and checkpoints every 16,000 frames; with FULL leaves both to SQLite', async () => {
    const walFds = () =>
      readdirSync('/proc/self/fd').filter((fd) => {
        try {
          return readlinkSync(`/proc/self/fd/${fd}`) === `${path}-wal`;
        } catch {
          return false;
        }
      }).length;
    const full = openStore();
    await full.sessions.create({ id: 'f', createdAt: T0 });
    for (let n = 1; n <= 70; n++)
      await full.events.append('f', [{ id: `f${n}`, type: 'test/note', v: 1, time: T0, entry: false, data: { n } }]);
    expect(full.walFlushes).toBe(0);
    expect(connection(full).pragma('wal_autocheckpoint', { simple: true })).toBe(1000);
    await full.close();

    const normal = openStore({ synchronous: 'NORMAL' });
    expect(connection(normal).pragma('wal_autocheckpoint', { simple: true })).toBe(16_000);
    await normal.sessions.create({ id: 's', createdAt: T0 });
    // SQLite's own descriptor of the WAL.
    const before = walFds();
    expect(before).toBe(1);
    // 1 commit for the session, 70 appends: syncs start at the 32nd and the 64th commit (unless the first still runs).
    for (let n = 1; n <= 70; n++)
      await normal.events.append('s', [{ id: `e${n}`, type: 'test/note', v: 1, time: T0, entry: false, data: { n } }]);
    expect(normal.walFlushes).toBeGreaterThanOrEqual(1);
    expect(normal.walFlushes).toBeLessThanOrEqual(2);
    expect(walFds()).toBe(before + 1);
    await normal.close();
    // Closed, neither SQLite nor the flusher keeps a descriptor of the WAL open.
    expect(walFds()).toBe(0);
    // Every commit is in the database, as with FULL.
    const again = openStore({ synchronous: 'NORMAL' });
    expect((await again.events.read('s')).map((e) => e.id)).toEqual(Array.from({ length: 70 }, (_, k) => `e${k + 1}`));
    expect(openStore({ path: ':memory:', synchronous: 'NORMAL' }).walFlushes).toBe(0);
  });

  it('refuses UPDATE and DELETE on events, even from another connection', async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const [e] = await store.events.append('s', [{ id: 'e1', type: 't', v: 1, time: T0, entry: true, data: { a: 1 } }]);

    // The log is stored in batches, the tree in entries (ADR-0009): neither can be changed or shrunk.
    const db = rawDb();
    expect(() => db.prepare("UPDATE event_batches SET data = x'00'").run()).toThrow('events are immutable');
    expect(() => db.prepare('UPDATE event_batches SET first_seq = 2').run()).toThrow('events are immutable');
    expect(() => db.prepare('DELETE FROM event_batches').run()).toThrow('events are immutable');
    expect(() => connection(store).prepare('DELETE FROM event_batches').run()).toThrow('events are immutable');
    // Sealed, the events are in a compressed row that cannot be changed or removed either, and
    // the tree is indexed in entries (ADR-0022), as immutable.
    await store.events.seal('s');
    expect(db.prepare('SELECT codec, first_seq, last_seq FROM event_batches').all()).toEqual([
      { codec: 3, first_seq: 1, last_seq: 1 },
    ]);
    expect(db.prepare('SELECT count(*) AS n FROM entries').get()).toEqual({ n: 1 });
    expect(() => db.prepare("UPDATE entries SET parent_id = 'x'").run()).toThrow('events are immutable');
    expect(() => db.prepare("DELETE FROM entries WHERE id = 'e1'").run()).toThrow('events are immutable');
    expect(() => connection(store).prepare('DELETE FROM entries').run()).toThrow('events are immutable');
    expect(() => db.prepare("UPDATE event_batches SET data = x'00'").run()).toThrow('events are immutable');
    expect(() => db.prepare('DELETE FROM event_batches').run()).toThrow('events are immutable');

    expect(await store.events.read('s')).toEqual([e]);
  });

  it('finds the entries of open rows written by another connection, refuses their ids again, and indexes them when sealed', async () => {
    const a = openStore();
    const b = openStore();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const entry = (id: string, parentId?: string) => ({
      id,
      type: 'test/entry',
      v: 1,
      time: T0,
      entry: true,
      data: { id },
      ...(parentId ? { parentId } : {}),
    });
    const ids = (events: Array<{ id: string }>) => events.map((e) => e.id);
    const indexed = () =>
      (rawDb({ readonly: true }).prepare('SELECT count(*) AS n FROM entries').get() as { n: number }).n;
    await a.events.append('s', [entry('e1'), entry('e2')]);
    // b has kept nothing of this session: it reads a's open rows.
    await b.events.append('s', [entry('e3', 'e1')]);
    expect(indexed()).toBe(0);
    expect(ids(await b.events.ancestors('s', 'e3', 10))).toEqual(['e3', 'e1']);
    // a kept its own append: the head moved since, so it reads the open rows again.
    expect(ids(await a.events.ancestors('s', 'e3', 10))).toEqual(['e3', 'e1']);
    expect(ids(await a.events.entries('s', ['e2', 'e3', 'nope']))).toEqual(['e2', 'e3']);
    await expect(a.events.append('s', [entry('e2')])).rejects.toMatchObject({ code: 'conflict' });
    await expect(b.events.append('s', [entry('e4'), entry('e4')])).rejects.toMatchObject({ code: 'conflict' });
    await expect(b.events.append('s', [entry('e5', 'elsewhere')])).rejects.toMatchObject({ code: 'invalid_parent' });
    // A rolled-back append leaves no entry behind, kept or stored.
    await expect(
      a.transaction(async (tx) => {
        await tx.events.append('s', [entry('e6', 'e3')]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    expect(ids(await a.events.entries('s', ['e6']))).toEqual([]);
    await a.events.append('s', [entry('e6', 'e3')]);
    // Sealed, they are indexed; the walk goes on from the open rows into the index.
    await b.events.seal('s');
    expect(indexed()).toBe(4);
    await a.events.append('s', [entry('e7')]);
    expect(ids(await a.events.ancestors('s', 'e7', 10))).toEqual(['e7', 'e6', 'e3', 'e1']);
    expect(ids(await b.events.ancestors('s', 'e7', 2))).toEqual(['e7', 'e6']);
    await expect(a.events.append('s', [entry('e3')])).rejects.toMatchObject({ code: 'conflict' });
    await expect(b.events.append('s', [entry('e8'), entry('e1')])).rejects.toMatchObject({ code: 'conflict' });
    expect(ids(await b.events.entries('s', ['e1', 'e7']))).toEqual(['e1', 'e7']);
  });

  it('keeps no entry of a rolled-back append among the open entries it extends in place, and takes the same seq for other entries after it', async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const entry = (id: string, parentId?: string) => ({
      id,
      type: 'test/entry',
      v: 1,
      time: T0,
      entry: true,
      data: { id },
      ...(parentId ? { parentId } : {}),
    });
    const ids = (events: Array<{ id: string }>) => events.map((e) => e.id);
    for (let n = 1; n <= 5; n++) await store.events.append('s', [entry(`e${n}`)]);
    // Rolled back after the append (the whole transaction, then a savepoint of a group commit).
    await expect(
      store.transaction(async (tx) => {
        await tx.events.append('s', [entry('x1', 'e5'), entry('x2')]);
        throw new Error('changed my mind');
      }),
    ).rejects.toThrow('changed my mind');
    const failing = store.events.append('s', [entry('x3', 'e5'), entry('e2')]);
    await expect(failing).rejects.toMatchObject({ code: 'conflict' });
    expect(ids(await store.events.entries('s', ['x1', 'x2', 'x3']))).toEqual([]);
    await expect(store.events.append('s', [entry('y1', 'x1')])).rejects.toMatchObject({ code: 'invalid_parent' });
    // The same seqs, other entries; the rolled-back ids are free again.
    const [y1] = await store.events.append('s', [entry('y1', 'e3'), entry('x2')]);
    expect(y1!.seq).toBe(6);
    await store.events.append('s', [entry('x1', 'x2')]);
    expect(ids(await store.events.ancestors('s', 'x1', 10))).toEqual(['x1', 'x2', 'y1', 'e3', 'e2', 'e1']);
    await expect(store.events.append('s', [entry('e4')])).rejects.toMatchObject({ code: 'conflict' });
    await expect(store.events.append('s', [entry('z', 'x3')])).rejects.toMatchObject({ code: 'invalid_parent' });
    await store.events.seal('s');
    expect((rawDb({ readonly: true }).prepare('SELECT count(*) AS n FROM entries').get() as { n: number }).n).toBe(8);
    expect(ids(await store.events.ancestors('s', 'x1', 10))).toEqual(['x1', 'x2', 'y1', 'e3', 'e2', 'e1']);
  });

  it('lets an open row of the log be removed only once the sealed row that starts at or before it holds it', async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const note = (n: number) => ({ id: `e${n}`, type: 'test/note', v: 1, time: T0, entry: false, data: { n } });
    for (let n = 1; n <= 3; n++) await store.events.append('s', [note(n)]);
    await store.events.seal('s');
    await store.events.append('s', [note(4)]);
    await store.events.append('s', [note(5)]);
    const db = rawDb();
    const [sealed] = db
      .prepare<[], { session_id: Buffer; data: Buffer }>('SELECT session_id, data FROM event_batches WHERE codec = 3')
      .all();
    const insert = db.prepare(
      'INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES (?, ?, ?, 3, ?)',
    );
    const remove = db.prepare('DELETE FROM event_batches WHERE session_id = ? AND first_seq = ? AND codec = 2');
    // Held by no sealed row: an earlier one ends before it, a later one starts after it.
    insert.run(sealed!.session_id, 5, 5, sealed!.data);
    expect(() => remove.run(sealed!.session_id, 4)).toThrow('events are immutable');
    // Held by the sealed row that starts at it: it may go.
    insert.run(sealed!.session_id, 4, 4, sealed!.data);
    expect(remove.run(sealed!.session_id, 4).changes).toBe(1);
    // A sealed row itself never goes.
    expect(() => db.prepare('DELETE FROM event_batches WHERE codec = 3 AND first_seq = 4').run()).toThrow(
      'events are immutable',
    );
  });

  it("keeps a session's log in open rows (one per append) until it is sealed, then in one compressed row; a long run of appends seals itself", async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const note = (n: number) => ({
      id: `e${n}`,
      type: 'test/note',
      v: 1,
      time: T0,
      entry: false,
      data: { n, text: 'the same words again and again '.repeat(4) },
    });
    for (let n = 1; n <= 10; n++) await store.events.append('s', [note(n)]);
    const rows = () =>
      rawDb({ readonly: true })
        .prepare<[], { codec: number; first_seq: number; last_seq: number; bytes: number }>(
          'SELECT codec, first_seq, last_seq, length(data) AS bytes FROM event_batches ORDER BY first_seq',
        )
        .all();
    const open = rows();
    expect(open.map((r) => [r.codec, r.first_seq, r.last_seq])).toEqual(
      Array.from({ length: 10 }, (_, i) => [2, i + 1, i + 1]),
    );
    await store.events.seal('s');
    const sealed = rows();
    expect(sealed.map((r) => [r.codec, r.first_seq, r.last_seq])).toEqual([[3, 1, 10]]);
    expect(sealed[0]!.bytes).toBeLessThan(open.reduce((a, r) => a + r.bytes, 0) / 5);
    expect((await store.events.read('s')).map((e) => e.data)).toEqual(
      Array.from({ length: 10 }, (_, i) => note(i + 1).data),
    );

    // 1,024 open events seal themselves, in the append that reaches them: ~200 KB of rows, sealed
    // with Zstandard (codec 4, from 16 KB on; ADR-0024).
    for (let n = 11; n <= 1040; n += 10)
      await store.events.append(
        's',
        Array.from({ length: 10 }, (_, k) => note(n + k)),
      );
    expect(rows().map((r) => [r.codec, r.first_seq, r.last_seq])).toEqual([
      [3, 1, 10],
      [4, 11, 1040],
    ]);
    expect((await store.events.read('s', { afterSeq: 10, limit: 5 })).map((e) => e.data)).toEqual(
      Array.from({ length: 5 }, (_, k) => note(11 + k).data),
    );
    expect((await store.events.read('s', { afterSeq: 1030 })).map((e) => e.id)).toEqual(
      Array.from({ length: 10 }, (_, k) => `e${1031 + k}`),
    );
  });

  it('reads a sealed row written by this codec forever: its dictionary and format never change', () => {
    // Written by codec 1 when it was made (ADR-0009); a change to the dictionary would misread it.
    expect(createHash('sha256').update(EVENT_BATCH_DICTIONARY_1).digest('hex')).toBe(DICTIONARY_1_SHA256);
    const row = Buffer.from(
      'g5a6BoaJRsaGiRa6RpYmprrmZmZpupaGJom6KeZGKYnJSYbmFkmg0gLkM3g04ixFjCxNjI0tjaCtZVCBC/cjvM8DiidQowVrOZJLZkGScXilwqMZzaBGEjw+UkG5Dm+MQJ1rrKOUDo6KFGj/LhYA',
      'base64',
    );
    expect(decodeBatch('s', 7, 1, row)).toEqual([
      {
        id: '01a231a8-2945-766f-914a-d72dacb178be',
        sessionId: 's',
        seq: 7,
        type: 'assistant/message',
        v: 1,
        time: 1796129433922,
        runId: 'r',
        turn: 1,
        step: 1,
        entry: true,
        parentId: 'p',
        ignorable: false,
        data: { message: { id: 'm', role: 'assistant', content: [{ type: 'text', text: 'hé ☃' }] } },
      },
      {
        id: 'e2',
        sessionId: 's',
        seq: 8,
        type: 'step/end',
        v: 1,
        time: 1796129433923,
        entry: false,
        ignorable: true,
        data: null,
      },
    ]);
  });

  it('a row it cannot read is a corrupt_log StoreError naming the session and seq, not a crash', async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    await store.sessions.create({ id: 't', createdAt: T0 });
    const db = rawDb();
    db.prepare(
      "INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES ('s', 1, 1, 1, x'00ff00ff')",
    ).run();
    db.prepare(
      "INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES ('t', 1, 1, 7, '[]')",
    ).run();
    db.prepare("UPDATE sessions SET last_seq = 1 WHERE id IN ('s', 't')").run();
    await expect(store.events.read('s')).rejects.toMatchObject({
      code: 'corrupt_log',
      message: expect.stringMatching(/session s: the events from seq 1 cannot be read/),
    });
    await expect(store.events.read('t')).rejects.toMatchObject({
      code: 'corrupt_log',
      message: expect.stringMatching(/codec 7/),
    });
    expect(await store.sessions.get('s')).toMatchObject({ lastSeq: 1 });
  });

  it("a run's turn end seals its session's log in the turn end's own commit", async () => {
    const store = openStore();
    const agent = defineAgent({
      name: 'sealer',
      model: new ScriptedModel([
        { toolCalls: [{ name: 'inc', input: { n: 1 } }] },
        { toolCalls: [{ name: 'inc', input: { n: 2 } }] },
        { text: 'done' },
      ]),
      tools: [
        tool({
          name: 'inc',
          description: 'increments',
          input: z.object({ n: z.number() }),
          idempotent: true,
          execute: ({ n }) => n + 1,
        }),
      ],
    });
    const rt = createRuntime({ store, agents: [agent] });
    rt.startWorker({ id: 'w', concurrency: 1 });
    try {
      const s = await rt.sessions.create({ agent: 'sealer' });
      const sent = await rt.sessions.send(s.id, 'go');
      expect(await rt.runs.wait(sent.run.id, { until: 'terminal' })).toMatchObject({ status: 'completed' });
      const events = await store.events.read(s.id);
      expect(events.at(-1)).toMatchObject({ type: 'run/status', data: { to: 'completed' } });
      const rows = rawDb({ readonly: true })
        .prepare('SELECT codec, first_seq, last_seq FROM event_batches ORDER BY first_seq')
        .all();
      expect(rows).toEqual([{ codec: 3, first_seq: 1, last_seq: events.length }]);
      expect(await store.sessions.get(s.id)).toMatchObject({ lastSeq: events.length });
    } finally {
      await rt.close();
    }
  });

  it("tells a listener of other connections' commits within 100 ms (data_version), not of its own, and stops when unregistered", async () => {
    const a = openStore();
    // Not on the file's local bus (it never listens): its commits are noticed by data_version alone.
    const b = openStore();
    await a.sessions.create({ id: 's', createdAt: T0 });
    let heard = 0;
    // The changes data_version tells, without details (a's own commits come with them, from the local bus: test/store/sqlite-live-bus.test.ts).
    const off = a.notices.changes((c) => c === undefined && heard++);
    await new Promise((r) => setTimeout(r, 120));
    heard = 0;
    await a.events.append('s', [{ id: 'own', type: 't', v: 1, time: T0, entry: false, data: null }]);
    await new Promise((r) => setTimeout(r, 150));
    expect(heard).toBe(0);
    const t0 = Date.now();
    await b.events.append('s', [{ id: 'theirs', type: 't', v: 1, time: T0, entry: false, data: null }]);
    await vi.waitFor(() => expect(heard).toBeGreaterThan(0), { timeout: 1000, interval: 5 });
    expect(Date.now() - t0).toBeLessThan(150);
    off();
    heard = 0;
    await b.events.append('s', [{ id: 'later', type: 't', v: 1, time: T0, entry: false, data: null }]);
    await new Promise((r) => setTimeout(r, 150));
    expect(heard).toBe(0);
  });

  it('refuses a database written by a newer schema with SchemaVersionError', async () => {
    await openStore().close();
    rawDb().pragma(`user_version = ${latestSchemaVersion + 1}`);

    let err: unknown;
    try {
      openStore();
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SchemaVersionError);
    expect(err).toBeInstanceOf(StoreError);
    expect((err as StoreError).code).toBe('schema_version');
    expect((err as Error).message).toMatch(/newer Keel/);
    expect((err as Error).message).toContain(`schema version ${latestSchemaVersion + 1}`);
    expect((err as Error).message).toContain(`up to ${latestSchemaVersion}`);
    // Nothing was changed in the refused file.
    expect(rawDb({ readonly: true }).pragma('user_version', { simple: true })).toBe(latestSchemaVersion + 1);
  });

  it('migrates a new database to the latest version once; reopening keeps the data', async () => {
    const first = openStore();
    expect(rawDb({ readonly: true }).pragma('user_version', { simple: true })).toBe(latestSchemaVersion);
    // Temporary B-trees in memory (ADR-0029): 2 is MEMORY.
    expect(connection(first).pragma('temp_store', { simple: true })).toBe(2);
    await first.sessions.create({ id: 's', createdAt: T0, title: 'persisted' });
    await first.events.append('s', [{ id: 'e1', type: 't', v: 1, time: T0, entry: true, data: null }]);
    await first.close();

    const second = openStore();
    expect(connection(second).pragma('user_version', { simple: true })).toBe(latestSchemaVersion);
    expect(await second.sessions.get('s')).toMatchObject({ title: 'persisted', lastSeq: 1, leafId: 'e1' });
    await second.events.append('s', [{ id: 'e2', type: 't', v: 1, time: T0, entry: true, data: null }]);
    await second.close();

    const tables = rawDb({ readonly: true })
      .prepare<[], { name: string }>("SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name")
      .all()
      .map((r) => r.name);
    expect(tables).toEqual([
      'api_keys',
      'batch_items',
      'batches',
      'blob_heads',
      'blob_refs',
      'blobs',
      'dataset_items',
      'datasets',
      'entries',
      'erased_logs',
      'erasures',
      'event_batches',
      'idempotency_keys',
      'model_limit_slots',
      'model_limit_state',
      'model_limit_usage',
      'model_limit_waiters',
      'quota_charges',
      'retention_leases',
      'retention_policies',
      'run_callbacks',
      'run_checkpoints',
      'run_inputs',
      'run_signals',
      'run_status_counts',
      'runs',
      'schedule_fires',
      'schedules',
      'session_archives',
      'sessions',
      'snapshots',
      'tenant_dispatch',
      'tenants',
      'webhook_attempts',
      'webhook_deliveries',
      'webhooks',
    ]);
  });

  it('two stores on one file see each other’s appends and keep one chain', async () => {
    const a = openStore();
    const b = openStore();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const mk = (id: string) => ({ id, type: 't', v: 1, time: T0, entry: true, data: null });
    await a.events.append('s', [mk('e1')]);
    const [e2] = await b.events.append('s', [mk('e2')]);
    const [e3] = await a.events.append('s', [mk('e3')], { expectLastSeq: 2 });
    expect(e2).toMatchObject({ seq: 2, parentId: 'e1' });
    expect(e3).toMatchObject({ seq: 3, parentId: 'e2' });
    expect(await b.sessions.get('s')).toMatchObject({ lastSeq: 3, leafId: 'e3' });
  });

  it("a fenced append takes the head its last append left only while nothing else can have moved it: another connection's commit, any other operation, a rollback", async () => {
    // The head a run's append leaves is kept for its next append (SessionHeads): each way it can go stale.
    const a = openStore();
    const b = openStore();
    await a.sessions.create({ id: 's', createdAt: T0 });
    await a.runs.create({
      id: 'r',
      sessionId: 's',
      agent: { name: 'agent', version: '1' },
      agentSpec: {},
      createdAt: T0,
    });
    const run = (await a.claims.claim('w1', 30_000, T0, CLAIM_POLICY, { runId: 'r' }))!.run;
    const fence = { runId: 'r', token: run.fencingToken };
    const mk = (id: string) => ({ id, type: 't', v: 1, time: T0, runId: 'r', entry: true, data: null });
    const seqOf = async (store: SqliteStore, id: string, options = {}) =>
      (await store.events.append('s', [mk(id)], options))[0]!;

    expect(await seqOf(a, 'a1', { fence })).toMatchObject({ seq: 1 });
    expect(await seqOf(a, 'a2', { fence })).toMatchObject({ seq: 2, parentId: 'a1' });
    // Another connection appends: the next fenced append of `a` comes after it, under it.
    expect(await seqOf(b, 'b1')).toMatchObject({ seq: 3, parentId: 'a2' });
    expect(await seqOf(a, 'a3', { fence })).toMatchObject({ seq: 4, parentId: 'b1' });
    // So does an append of its own connection that is not this run's (a message sent meanwhile).
    expect(await seqOf(a, 'u1')).toMatchObject({ seq: 5, parentId: 'a3' });
    expect(await seqOf(a, 'a3b', { fence })).toMatchObject({ seq: 6, parentId: 'u1' });
    // Another connection moves the fencing token: `a` is fenced out at once.
    await seqOf(a, 'a4', { fence });
    await b.runs.update('r', { fence: true });
    await expect(a.events.append('s', [mk('x1')], { fence })).rejects.toBeInstanceOf(FencedError);
    const fence2 = { runId: 'r', token: run.fencingToken + 1 };
    expect(await seqOf(a, 'a5', { fence: fence2 })).toMatchObject({ seq: 8, parentId: 'a4' });
    // Its own connection moves it.
    await a.runs.update('r', { fence: true });
    await expect(a.events.append('s', [mk('x2')], { fence: fence2 })).rejects.toBeInstanceOf(FencedError);
    const fence3 = { runId: 'r', token: run.fencingToken + 2 };
    // An append that rolls back teaches nothing: the next one takes its seq.
    await seqOf(a, 'a6', { fence: fence3 });
    await expect(
      a.transaction(async (tx) => {
        await tx.events.append('s', [mk('x3')], { fence: fence3 });
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    expect(await seqOf(a, 'a7', { fence: fence3 })).toMatchObject({ seq: 10, parentId: 'a6' });
    // A seal after an append in one transaction: the next append knows the log is sealed.
    await a.transaction(async (tx) => {
      await tx.events.append('s', [mk('a8')], { fence: fence3 });
      await tx.events.seal('s');
    });
    expect(await seqOf(a, 'a9', { fence: fence3 })).toMatchObject({ seq: 12, parentId: 'a8' });
    await a.events.seal('s');
    expect((await b.events.read('s')).map((e) => [e.seq, e.id])).toEqual(
      ['a1', 'a2', 'b1', 'a3', 'u1', 'a3b', 'a4', 'a5', 'a6', 'a7', 'a8', 'a9'].map((id, i) => [i + 1, id]),
    );
    expect(await b.sessions.get('s')).toMatchObject({ lastSeq: 12, leafId: 'a9' });
  });

  it('an append leaves the session head in its open row, not in the sessions row; readers, other connections, a reopened file, a seal and an erasure all see it', async () => {
    const a = openStore();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const mk = (id: string, turn?: number) => ({
      id,
      type: 't',
      v: 1,
      time: T0,
      entry: true,
      data: null,
      ...(turn !== undefined ? { turn } : {}),
    });
    await a.events.append('s', [mk('e1', 1), mk('e2', 1)]);
    await a.events.append('s', [mk('e3', 2)]);
    const raw = rawDb({ readonly: true });
    const sessionsRow = () =>
      raw.prepare('SELECT last_seq, leaf_id, last_turn, sealed_seq FROM sessions WHERE id = ?').get('s');
    // The sessions row was not written; each open row says where the head was after it.
    expect(sessionsRow()).toEqual({ last_seq: 0, leaf_id: null, last_turn: 0, sealed_seq: 0 });
    expect(
      raw.prepare('SELECT first_seq, last_seq, leaf_id, turn FROM event_batches ORDER BY first_seq').all(),
    ).toEqual([
      { first_seq: 1, last_seq: 2, leaf_id: 'e2', turn: 1 },
      { first_seq: 3, last_seq: 3, leaf_id: 'e3', turn: 2 },
    ]);
    const head = { lastSeq: 3, leafId: 'e3', lastTurn: 2 };
    expect(await a.sessions.get('s')).toMatchObject(head);
    expect((await a.sessions.list({ limit: 10 })).find((x) => x.id === 's')).toMatchObject(head);
    // Another connection, and the file reopened (no seal, as after a crash), read the same head and append after it.
    const b = openStore();
    expect(await b.sessions.get('s')).toMatchObject(head);
    expect((await b.events.append('s', [mk('e4')]))[0]).toMatchObject({ seq: 4, parentId: 'e3' });
    await a.close();
    const c = openStore();
    expect(await c.sessions.get('s')).toMatchObject({ lastSeq: 4, leafId: 'e4', lastTurn: 2 });
    expect((await c.events.ancestors('s', 'e4', 10)).map((e) => e.id)).toEqual(['e4', 'e3', 'e2', 'e1']);
    // A run's events start after the head.
    const run = await c.runs.create({
      id: 'r',
      sessionId: 's',
      agent: { name: 'agent', version: '1' },
      agentSpec: {},
      createdAt: T0,
    });
    await c.events.append('s', [{ ...mk('e5'), runId: run.id }]);
    expect((await c.events.read('s', { runId: 'r' })).map((e) => e.seq)).toEqual([5]);
    expect(raw.prepare('SELECT first_seq FROM runs WHERE id = ?').get('r')).toEqual({ first_seq: 5 });
    // A seal puts the head into the sessions row: no open row is left to carry it.
    await c.events.seal('s');
    expect(sessionsRow()).toEqual({ last_seq: 5, leaf_id: 'e5', last_turn: 2, sealed_seq: 5 });
    expect(await b.sessions.get('s')).toMatchObject({ lastSeq: 5, leafId: 'e5', lastTurn: 2 });
    // An erasure keeps the last seq of a log whose head was in open rows.
    await c.events.append('s', [mk('e6', 3)]);
    await c.runs.update('r', { status: 'completed', endedAt: T0 });
    expect(await c.sessions.erase('s', T0)).toMatchObject({ lastSeq: 6, leafId: null });
    expect(await b.sessions.get('s')).toMatchObject({ lastSeq: 6, lastTurn: 3 });
  });

  it('opens a schema v16 database, whose sessions rows hold the head beside open rows, and appends after that head', async () => {
    const a = openStore();
    await a.sessions.create({ id: 's', createdAt: T0 });
    const mk = (id: string) => ({ id, type: 't', v: 1, time: T0, turn: 1, entry: true, data: null });
    await a.events.append('s', [mk('e1'), mk('e2')]);
    await a.close();
    // As schema v16 left it: the sessions row moved with each append, open rows without a head
    // (and without what later versions added: runs' tenants, v20; reruns' lineage, v21; datasets and batches, v22; the quota ledger, v27).
    const db = rawDb();
    db.exec(`UPDATE sessions SET last_seq = 2, leaf_id = 'e2', last_turn = 1 WHERE id = 's';
             ALTER TABLE event_batches DROP COLUMN leaf_id; ALTER TABLE event_batches DROP COLUMN turn;
             DROP INDEX runs_due; ALTER TABLE runs DROP COLUMN due_at; ALTER TABLE schedules DROP COLUMN paused_reason;
             DROP INDEX runs_ready_by_tenant; DROP TABLE tenants; DROP TABLE tenant_dispatch;
             ALTER TABLE api_keys DROP COLUMN scope; ALTER TABLE api_keys DROP COLUMN quotas;
             DROP INDEX runs_tenant_waiting; ALTER TABLE runs DROP COLUMN tenant;
             DROP INDEX runs_rerun_of; ALTER TABLE runs DROP COLUMN rerun_of;
             DROP TABLE dataset_items; DROP TABLE datasets; DROP TABLE batch_items; DROP TABLE batches; DROP TABLE quota_charges; PRAGMA user_version = 16;`);
    db.close();
    const b = openStore();
    expect(await b.sessions.get('s')).toMatchObject({ lastSeq: 2, leafId: 'e2', lastTurn: 1 });
    expect((await b.events.append('s', [mk('e3')]))[0]).toMatchObject({ seq: 3, parentId: 'e2' });
    expect(await b.sessions.get('s')).toMatchObject({ lastSeq: 3, leafId: 'e3' });
    await b.events.seal('s');
    expect((await b.events.read('s')).map((e) => [e.seq, e.id])).toEqual([
      [1, 'e1'],
      [2, 'e2'],
      [3, 'e3'],
    ]);
  });

  it('opens a database from before schema v19: ended deliveries get their end time, pending ones of a disabled subscription end failed', async () => {
    const a = openStore();
    const hook = (id: string, active: boolean) => ({
      id,
      tenant: 't',
      url: 'https://example.test/',
      events: ['run.completed' as const],
      secret: 's',
      previousSecret: null,
      previousSecretExpiresAt: null,
      active,
      createdAt: T0,
      updatedAt: T0 + 5,
    });
    await a.webhooks.create(hook('on', true));
    await a.webhooks.create(hook('off', true));
    const d = (id: string, webhookId: string) => ({
      id,
      webhookId,
      tenant: 't',
      eventType: 'run.completed' as const,
      eventId: id,
      sessionId: null,
      body: '{}',
      createdAt: T0,
      nextAttemptAt: T0,
      retryUntil: T0 + 1000,
    });
    await a.webhooks.addDeliveries([d('ok', 'on'), d('bad', 'on'), d('waiting', 'off')]);
    for (const c of await a.webhooks.claimDeliveries(T0, 1000, 2)) {
      const failed = c.id === 'bad';
      const attempt = {
        deliveryId: c.id,
        n: 1,
        startedAt: T0 + 10,
        durationMs: 7,
        statusCode: failed ? 500 : 200,
        error: failed ? 'HTTP 500' : null,
      };
      await a.webhooks.recordAttempt({
        deliveryId: c.id,
        claim: c.claim,
        attempt,
        status: failed ? 'failed' : 'delivered',
        nextAttemptAt: null,
      });
    }
    await a.close();
    // As schema 17/18 left it: no end times, and a disabled subscription's delivery left pending.
    const db = rawDb();
    db.exec(`UPDATE webhooks SET active = 0 WHERE id = 'off';
             UPDATE webhook_deliveries SET status = 'pending', leased_until = NULL, next_attempt_at = ${T0} WHERE id = 'waiting';
             DROP INDEX webhook_deliveries_ended; DROP INDEX webhook_deliveries_session; DROP INDEX webhook_deliveries_without_session;
             DROP TABLE erasures;
             ALTER TABLE webhook_deliveries DROP COLUMN ended_at; ALTER TABLE webhook_deliveries DROP COLUMN session_id;
             ALTER TABLE webhooks DROP COLUMN previous_secret; ALTER TABLE webhooks DROP COLUMN previous_secret_expires_at;
             DROP INDEX runs_ready_by_tenant; DROP TABLE tenants; DROP TABLE tenant_dispatch;
             ALTER TABLE api_keys DROP COLUMN scope; ALTER TABLE api_keys DROP COLUMN quotas;
             DROP INDEX runs_tenant_waiting; ALTER TABLE runs DROP COLUMN tenant;
             DROP INDEX runs_rerun_of; ALTER TABLE runs DROP COLUMN rerun_of;
             DROP TABLE dataset_items; DROP TABLE datasets; DROP TABLE batch_items; DROP TABLE batches; DROP TABLE quota_charges;
             PRAGMA user_version = 18;`);
    db.close();
    const b = openStore();
    expect(await b.webhooks.getDelivery('ok')).toMatchObject({
      status: 'delivered',
      endedAt: T0 + 17,
      sessionId: null,
    });
    expect(await b.webhooks.getDelivery('bad')).toMatchObject({ status: 'failed', endedAt: T0 + 17 });
    expect(await b.webhooks.getDelivery('waiting')).toMatchObject({
      status: 'failed',
      endedAt: T0 + 5,
      lastError: 'subscription disabled',
    });
    expect(await b.webhooks.hasDueDeliveries(T0 + 10_000)).toBe(false);
    expect(await b.webhooks.get('on')).toMatchObject({ previousSecret: null, previousSecretExpiresAt: null });
  });

  it('two stores on one file in one process take turns to write: a transaction that awaits does not make the other give up (database is locked)', async () => {
    // SQLite's lock waits by sleeping the thread: the other store's transaction, suspended at an
    // await in this same thread, could never end, and the waiting write would fail after the busy timeout.
    const a = openStore({ busyTimeoutMs: 300 });
    const b = openStore({ busyTimeoutMs: 300 });
    await a.sessions.create({ id: 's', createdAt: T0 });
    const mk = (id: string) => ({ id, type: 't', v: 1, time: T0, entry: true, data: null });
    const order: string[] = [];
    const inA = a.transaction(async (tx) => {
      await tx.events.append('s', [mk('a1')]);
      order.push('a1');
      await new Promise((r) => setTimeout(r, 100));
      await tx.events.append('s', [mk('a2')]);
      order.push('a2');
    });
    await new Promise((r) => setTimeout(r, 20)); // a holds the write lock now
    const inB = b.events.append('s', [mk('b1')]).then(() => order.push('b1'));
    await Promise.all([inA, inB]);
    expect(order).toEqual(['a1', 'a2', 'b1']);
    expect((await b.events.read('s')).map((e) => e.id)).toEqual(['a1', 'a2', 'b1']);

    // A store's single writes (autocommit) and immediate transactions take the same turns.
    const slow = a.transaction(async (tx) => {
      await new Promise((r) => setTimeout(r, 100));
      await tx.events.append('s', [mk('a3')]);
    });
    await new Promise((r) => setTimeout(r, 20));
    await b.sessions.create({ id: 't', createdAt: T0 });
    await slow;
    expect(await b.sessions.get('t')).toMatchObject({ id: 't' });

    // A turn that does not come within the busy timeout fails as SQLite's own wait would, with
    // nothing written; the holder is not disturbed.
    const holder = a.transaction(async (tx) => {
      await tx.events.append('s', [mk('a4')]);
      await new Promise((r) => setTimeout(r, 500));
    });
    await new Promise((r) => setTimeout(r, 20));
    await expect(b.events.append('s', [mk('b2')])).rejects.toMatchObject({ name: 'StoreError', code: 'busy' });
    await holder;
    // The store that gave up writes again at its next turn.
    await b.events.append('s', [mk('b3')]);
    expect((await b.events.read('s')).map((e) => e.id)).toEqual(['a1', 'a2', 'b1', 'a3', 'a4', 'b3']);
  });

  it('defaultDbPath() honours KEEL_DB, else ./.keel/keel.db', async () => {
    const saved = process.env.KEEL_DB;
    try {
      const target = join(dir, 'from-env', 'env.db');
      process.env.KEEL_DB = target;
      expect(defaultDbPath()).toBe(target);
      const store = new SqliteStore();
      open.push(store);
      expect(store.path).toBe(target);
      await store.sessions.create({ id: 's', createdAt: T0 });
      expect(existsSync(target)).toBe(true);

      delete process.env.KEEL_DB;
      expect(defaultDbPath()).toBe(resolve('.keel', 'keel.db'));
    } finally {
      if (saved === undefined) delete process.env.KEEL_DB;
      else process.env.KEEL_DB = saved;
    }
  });

  it('commitCount counts one commit for an append, and one for a transaction of several writes', async () => {
    const store = openStore();
    expect(store.commitCount).toBe(0);
    await store.sessions.create({ id: 's', createdAt: T0 });
    const mk = (id: string) => ({ id, type: 't', v: 1, time: T0, entry: true, data: { id } });

    let before = store.commitCount;
    await store.events.append('s', [mk('e1'), mk('e2')]);
    expect(store.commitCount).toBe(before + 1);

    // Reads commit nothing.
    before = store.commitCount;
    await store.events.read('s');
    await store.sessions.get('s');
    expect(store.commitCount).toBe(before);

    before = store.commitCount;
    await store.transaction(async (tx) => {
      await tx.events.putBlobs([{ hash: 'h1', data: 'blob' }]);
      await tx.events.append('s', [mk('e3')]);
      await tx.sessions.update('s', { title: 'renamed' });
      await tx.events.append('s', [mk('e4')]);
    });
    expect(store.commitCount).toBe(before + 1);
    expect(await store.sessions.get('s')).toMatchObject({ lastSeq: 4, title: 'renamed' });

    // A transaction that throws alone in its group rolls back: nothing commits, nothing counts.
    before = store.commitCount;
    await expect(
      store.transaction(async (tx) => {
        await tx.events.append('s', [mk('e5')]);
        throw new Error('no');
      }),
    ).rejects.toThrow('no');
    expect(store.commitCount).toBe(before);
    expect((await store.sessions.get('s'))!.lastSeq).toBe(4);

    // Writes queued together share one group commit.
    before = store.commitCount;
    await Promise.all([
      store.events.append('s', [mk('e6')]),
      store.events.append('s', [mk('e7')]),
      store.events.putBlobs([{ hash: 'h2', data: 'x' }]),
    ]);
    expect(store.commitCount).toBe(before + 1);

    // An operation in its own immediate transaction counts one.
    before = store.commitCount;
    await store.sessions.update('s', { title: 'again' });
    expect(store.commitCount).toBe(before + 1);
  });

  it('append returns the draft’s own data object (no copy), and stores what it was at the time', async () => {
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    const data = { text: 'hi', nested: { n: 1 } };
    const [e] = await store.events.append('s', [{ id: 'e1', type: 't', v: 1, time: T0, entry: true, data }]);
    expect(e!.data).toBe(data);
    data.nested.n = 2;
    expect((await store.events.read('s'))[0]!.data).toEqual({ text: 'hi', nested: { n: 1 } });
  });

  it('creates missing parent directories', async () => {
    path = join(dir, 'a', 'b', 'c', 'keel.db');
    const store = openStore();
    await store.sessions.create({ id: 's', createdAt: T0 });
    expect(existsSync(path)).toBe(true);
  });
});

tenantsContract('sqlite (file, two instances)', twoInstances('keel-tenants-'));
tenantsContract('sqlite (:memory:)', async () => {
  const store = new SqliteStore({ path: ':memory:' });
  return { store, cleanup: () => store.close() };
});
