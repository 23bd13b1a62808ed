import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import {
  decodeBatch,
  encodeOpen,
  encodeOpen0,
  LEAN_SEALED_CODEC,
  OPEN_CODEC,
  OPEN_CODEC_0,
  sealLean,
  ZSTD_SEALED_CODEC,
} from '../../src/store/sqlite/event-batch-codec.ts';
import { idKey } from '../../src/store/sqlite/id-keys.ts';
import { SqliteStore } from '../../src/store/sqlite/store.ts';
import type { StoredEvent } from '../../src/store/index.ts';

const T0 = 1_796_000_000_000;

/** Events as the store returns them: every shape a row must keep (ADR-0020). */
function events(sessionId: string, firstSeq: number): StoredEvent[] {
  const e = (o: Partial<StoredEvent> & Pick<StoredEvent, 'id' | 'type'>): StoredEvent => ({
    sessionId,
    seq: 0,
    v: 1,
    time: T0,
    entry: false,
    ignorable: false,
    data: {},
    ...o,
  });
  const list: StoredEvent[] = [
    // At the root of the tree (no parent), no run, no turn.
    e({ id: 'u1', type: 'user/message', entry: true, data: { message: { role: 'user', content: 'hi' } } }),
    e({ id: 's1', type: 'step/start', v: 1, time: T0 + 3, runId: 'run-1', turn: 1, step: 1, data: {} }),
    // A newer event version, a time before the row's first, an ignorable event, data null.
    e({
      id: 'h1',
      type: 'request/header',
      v: 2,
      time: T0 - 5,
      runId: 'run-1',
      turn: 1,
      step: 1,
      ignorable: true,
      data: null,
    }),
    // Its parent is the entry before it in the row.
    e({
      id: 'a1',
      type: 'assistant/message',
      runId: 'run-1',
      turn: 1,
      step: 1,
      entry: true,
      parentId: 'u1',
      data: { text: 'é ☃ "quoted"' },
    }),
    // Its parent is an entry that is not the one before it (a branch).
    e({ id: 'a2', type: 'assistant/message', runId: 'run-1', turn: 2, step: 1, entry: true, parentId: 'u1', data: {} }),
    // An entry at the root again, after other entries.
    e({ id: 'c1', type: 'compaction', runId: 'run-2', turn: 2, entry: true, data: { n: 1 } }),
    // A non-entry event naming a parent (not made by Keel's own code, but kept as it is).
    e({ id: 'x1', type: 'test/note', entry: false, parentId: 'a2', data: { n: 2 } }),
    // Data left out.
    e({ id: 'x2', type: 'test/empty', data: undefined }),
  ];
  return list.map((x, k) => ({ ...x, seq: firstSeq + k }));
}

/** The same events as JSON would give them back (data undefined is left out). */
const asRead = (list: StoredEvent[]) => JSON.parse(JSON.stringify(list)) as StoredEvent[];

describe('the log rows of the SQLite store (ADR-0009, ADR-0020)', () => {
  it('an open row of codec 2 reads back every event as it was: runs, turns, times, versions, parents, flags and data', () => {
    const list = events('s', 7);
    const row = encodeOpen(list);
    expect(decodeBatch('s', 7, OPEN_CODEC, row)).toEqual(asRead(list));
    expect(decodeBatch('s', 7, OPEN_CODEC, Buffer.from(row))).toEqual(asRead(list));
    // A row whose first event has a run, a turn and a step: later events without them say so.
    const fromRun = events('s', 7).slice(1);
    expect(encodeOpen(fromRun)).toMatch(/^\{"r":"run-1","u":1,"s":1,"m":/);
    expect(decodeBatch('s', 8, OPEN_CODEC, encodeOpen(fromRun))).toEqual(asRead(fromRun));
  });

  it('says once what the events of a step share: the row of a step is much smaller than the codec-0 row of the same events', () => {
    const step: StoredEvent[] = ['request/header', 'assistant/message', 'tool/call', 'tool/result', 'step/end'].map(
      (type, k) => ({
        id: `01a233a2-7ab4-72a2-9d1a-24a1c8000a4${k}`,
        sessionId: 's',
        seq: 10 + k,
        type,
        v: type === 'request/header' ? 2 : 1,
        time: T0 + (k > 2 ? 1 : 0),
        runId: '01a233a2-7a95-74b8-9ffe-e7f4a005407c',
        turn: 1,
        step: 2,
        entry: type === 'assistant/message' || type === 'tool/result',
        ...(type === 'assistant/message'
          ? { parentId: '01a233a2-7aaf-7568-8d3d-f9c1747dcd84' }
          : type === 'tool/result'
            ? { parentId: '01a233a2-7ab4-72a2-9d1a-24a1c8000a41' }
            : {}),
        ignorable: false,
        data: { k },
      }),
    );
    const lean = encodeOpen(step);
    expect(decodeBatch('s', 10, OPEN_CODEC, lean)).toEqual(step);
    // The run (5 × 36 characters), the turn, the step, the times and the second parent are said once or not at all.
    expect(encodeOpen0(step).length - lean.length).toBeGreaterThan(300);
    expect(lean).not.toContain('"p":"01a233a2-7ab4-72a2-9d1a-24a1c8000a41"');
    expect(lean.match(/01a233a2-7a95-74b8-9ffe-e7f4a005407c/g)).toHaveLength(1);
  });

  it("seals open rows of codec 0 (an older Keel's) and codec 2 together into one codec-3 row without parsing them", () => {
    const list = events('s', 1);
    const rows = [
      { codec: OPEN_CODEC_0, data: encodeOpen0(list.slice(0, 3)) },
      { codec: OPEN_CODEC, data: encodeOpen(list.slice(3, 6)) },
      { codec: OPEN_CODEC_0, data: encodeOpen0(list.slice(6)) },
    ];
    const sealed = sealLean(rows);
    expect(sealed.codec).toBe(LEAN_SEALED_CODEC);
    expect(decodeBatch('s', 1, LEAN_SEALED_CODEC, sealed.data)).toEqual(asRead(list));
    expect(() => sealLean([{ codec: 1, data: 'x' }])).toThrow(/codec 1 cannot be sealed/);
  });

  it('seals rows read as bytes (as the store reads them) exactly as the same rows read as text, outside ASCII too', () => {
    const list = events('s', 1).map((e, k) => ({ ...e, data: { k, text: `héllo ✓ 😀 ${'ж'.repeat(k)}` } }));
    const asText = [
      { codec: OPEN_CODEC_0, data: encodeOpen0(list.slice(0, 3)) },
      { codec: OPEN_CODEC, data: encodeOpen(list.slice(3)) },
    ];
    const asBytes = asText.map((r) => ({ codec: r.codec, data: new Uint8Array(Buffer.from(r.data, 'utf8')) }));
    const fromText = sealLean(asText);
    const fromBytes = sealLean(asBytes);
    expect(fromBytes).toEqual(fromText);
    expect(decodeBatch('s', 1, fromBytes.codec, fromBytes.data)).toEqual(asRead(list));
    // An open row read as bytes decodes as its text does.
    expect(decodeBatch('s', 4, OPEN_CODEC, asBytes[1]!.data)).toEqual(decodeBatch('s', 4, OPEN_CODEC, asText[1]!.data));
  });

  it('seals 16 KB of lean rows or more into a codec-4 row (Zstandard, ADR-0024) that reads back the same; less stays codec 3', () => {
    // Rows of one step each, as a turn's appends write them, with ~700 characters of data apiece.
    const stepRows = (n: number) =>
      Array.from({ length: n }, (_, k) => {
        const list = events('s', 1 + k * 8).map((e) => ({ ...e, data: { k, text: `step ${k} `.repeat(70) } }));
        return { list, row: { codec: OPEN_CODEC, data: encodeOpen(list) } };
      });
    const lengthOf = (rows: Array<{ row: { data: string } }>) => rows.reduce((a, r) => a + r.row.data.length + 1, 1);
    let n = 1;
    while (lengthOf(stepRows(n + 1)) < 16_384) n++;
    // n rows stay below the threshold, n + 1 reach it.
    const below = stepRows(n);
    const from = stepRows(n + 1);
    const small = sealLean(below.map((r) => r.row));
    const large = sealLean(from.map((r) => r.row));
    expect(small.codec).toBe(LEAN_SEALED_CODEC);
    expect(large.codec).toBe(ZSTD_SEALED_CODEC);
    expect(decodeBatch('s', 1, LEAN_SEALED_CODEC, small.data)).toEqual(asRead(below.flatMap((r) => r.list)));
    expect(decodeBatch('s', 1, ZSTD_SEALED_CODEC, large.data)).toEqual(asRead(from.flatMap((r) => r.list)));
    // Compressed, not stored: the repeated text shrinks to a small part of itself.
    expect(large.data.length).toBeLessThan(lengthOf(from) / 4);
    expect(() => decodeBatch('s', 1, ZSTD_SEALED_CODEC, Buffer.from('not zstd'))).toThrow(
      expect.objectContaining({ code: 'corrupt_log' }),
    );
  });

  it('reads a codec-4 row written when the codec was made: Zstandard frames of the codec-3 layout, no dictionary', () => {
    const row = Buffer.from(PINNED_CODEC_4, 'base64');
    expect(decodeBatch('s', 4, ZSTD_SEALED_CODEC, row)).toEqual(
      decodeBatch('s', 4, LEAN_SEALED_CODEC, Buffer.from(PINNED_CODEC_3, 'base64')),
    );
    expect(decodeBatch('s', 4, ZSTD_SEALED_CODEC, row)[1]).toMatchObject({
      id: 'e5',
      seq: 5,
      parentId: 'e4',
      data: { ok: true },
    });
  });

  it('reads a codec-3 row written when the codec was made: its layout and dictionary never change', () => {
    // sealLean of one codec-2 row of two events, written by this codec when it was made (ADR-0020).
    const row = Buffer.from(PINNED_CODEC_3, 'base64');
    expect(decodeBatch('s', 4, LEAN_SEALED_CODEC, row)).toEqual([
      {
        id: 'e4',
        sessionId: 's',
        seq: 4,
        type: 'assistant/message',
        v: 1,
        time: T0,
        runId: 'r',
        turn: 3,
        step: 2,
        entry: true,
        parentId: 'p',
        ignorable: false,
        data: { text: 'hé ☃' },
      },
      {
        id: 'e5',
        sessionId: 's',
        seq: 5,
        type: 'tool/result',
        v: 1,
        time: T0 + 2,
        runId: 'r',
        turn: 3,
        step: 2,
        entry: true,
        parentId: 'e4',
        ignorable: false,
        data: { ok: true },
      },
    ]);
  });

  it('a lean row that cannot be read is a corrupt_log StoreError: not a list, or an entry naming no parent', () => {
    expect(() => decodeBatch('s', 1, OPEN_CODEC, '{"m":1}')).toThrow(/session s: the events from seq 1 are not a list/);
    expect(() => decodeBatch('s', 1, OPEN_CODEC, '{"m":1,"e":[{"i":"a","t":"x","e":1}]}')).toThrow(
      /entry a at seq 1 names no parent/,
    );
    expect(() => decodeBatch('s', 1, OPEN_CODEC, '{"m":')).toThrow(expect.objectContaining({ code: 'corrupt_log' }));
  });
});

describe('a SQLite log with open rows written before ADR-0020', () => {
  let dir: string;
  beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'keel-codec-'))));
  afterEach(() => rmSync(dir, { recursive: true, force: true }));

  it('reads them, appends after them in codec 2, and seals both into one codec-3 row; nothing else may remove them', async () => {
    const path = join(dir, 'keel.db');
    const store = new SqliteStore({ path });
    try {
      await store.sessions.create({ id: 's', createdAt: T0 });
      // What the Keel before ADR-0020 left of a turn still running: codec-0 open rows, the tree, the head.
      const old = events('s', 1).slice(0, 4);
      const raw = new Database(path);
      raw
        .prepare('INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES (?, ?, ?, 0, ?)')
        .run(idKey('s'), 1, 2, encodeOpen0(old.slice(0, 2)));
      raw
        .prepare('INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES (?, ?, ?, 0, ?)')
        .run(idKey('s'), 3, 4, encodeOpen0(old.slice(2)));
      raw
        .prepare('INSERT INTO entries (session_id, id, seq, parent_id) VALUES (?, ?, ?, ?)')
        .run(idKey('s'), idKey('u1'), 1, null);
      raw
        .prepare('INSERT INTO entries (session_id, id, seq, parent_id) VALUES (?, ?, ?, ?)')
        .run(idKey('s'), idKey('a1'), 4, idKey('u1'));
      raw.prepare("UPDATE sessions SET last_seq = 4, leaf_id = 'a1' WHERE id = 's'").run();
      expect(await store.events.read('s')).toEqual(asRead(old));

      const added = await store.events.append('s', [
        {
          id: 't1',
          type: 'tool/result',
          v: 1,
          time: T0 + 9,
          runId: 'run-1',
          turn: 1,
          step: 1,
          entry: true,
          data: { ok: 1 },
        },
        { id: 'n1', type: 'test/note', v: 1, time: T0 + 9, entry: false, data: null },
      ]);
      expect(added.map((e) => [e.seq, e.parentId])).toEqual([
        [5, 'a1'],
        [6, undefined],
      ]);
      const codecs = () =>
        raw.prepare('SELECT codec, first_seq, last_seq FROM event_batches ORDER BY first_seq, codec').raw().all();
      expect(codecs()).toEqual([
        [0, 1, 2],
        [0, 3, 4],
        [2, 5, 6],
      ]);
      expect(() => raw.prepare('DELETE FROM event_batches WHERE codec = 2').run()).toThrow('events are immutable');

      await store.events.seal('s');
      expect(codecs()).toEqual([[3, 1, 6]]);
      expect(await store.events.read('s')).toEqual([...asRead(old), ...added]);
      expect(await store.events.entries('s', ['t1'])).toEqual([added[0]]);
      expect(() => raw.prepare('DELETE FROM event_batches').run()).toThrow('events are immutable');
      raw.close();
    } finally {
      await store.close();
    }
  });
});

/** The same events as PINNED_CODEC_3, written by codec 4 when it was made (ADR-0024). */
const PINNED_CODEC_4 =
  'KLUv/SCwHQQAUkgbIqApjQH/c5VrBHfYrA+RNiCx28z2gCWpf4Hirf1PMoGsqp9Na1pLiS3OgNb3PpImUx4I2sK19gMyAUQki/F15D7hie9oPPqWU6FUcynbUKuOqhrfb0KOO08Mnl/AgDgs+PoEuH4DXPpm4+yJCQcAQxAAAxDMrZCFlpDvSrX3C5w=';
const PINNED_CODEC_3 =
  'i64GuwNUKpaCCxaIQ6CuNYABcPBCS+hUUL0P8iM8QpHKE0QsgJokkGiA5PKMwysVHs1oRkR4qinWKM9Fik2w/vxs6FhRbWxtLAA=';
