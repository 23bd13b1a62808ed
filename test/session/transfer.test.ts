import { afterEach, describe, expect, it } from 'vitest';
import {
  blobHash,
  exportSession,
  ImportError,
  importSession,
  ScriptedModel,
  StoreError,
  verifyReplay,
  type Sessions,
  type SqliteStore,
} from '../../src/index.ts';
import {
  agentWith,
  allEvents,
  exportText,
  LONG_SYSTEM,
  memorySessions,
  richSession,
  turn,
} from '../support/session-helpers.ts';

const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function open(): { store: SqliteStore; sessions: Sessions } {
  const m = memorySessions();
  stores.push(m.store);
  return m;
}

/** Everything a reader sees of a session. */
async function views(sessions: Sessions, id: string) {
  return {
    record: await sessions.get(id),
    events: await allEvents(sessions, id),
    context: await sessions.context(id),
    transcript: await sessions.transcript(id),
    developer: await sessions.developerView(id),
    stats: await sessions.stats(id),
  };
}

type Line = Record<string, unknown> & {
  kind: string;
  type?: string;
  seq?: number;
  id?: string;
  entry?: boolean;
  hash?: string;
  data?: unknown;
};
const dataOf = (l: Line) => l.data as Record<string, unknown>;
const parse = (text: string): Line[] => text.split('\n').map((l) => JSON.parse(l) as Line);
const serialize = (lines: ReadonlyArray<Line | string>): string =>
  lines.map((l) => (typeof l === 'string' ? l : JSON.stringify(l))).join('\n');

async function importError(sessions: Sessions, input: string): Promise<ImportError> {
  const error = await importSession(sessions.log, input).then(
    () => undefined,
    (e: unknown) => e,
  );
  expect(error).toBeInstanceOf(ImportError);
  return error as ImportError;
}

describe('export and import', () => {
  it('round-trips exactly: export, import into a fresh store, export again gives identical text', async () => {
    const { sessions } = open();
    const { id } = await richSession(sessions);
    await sessions.archive(id);
    const text = await exportText(sessions, id);

    const lines = parse(text);
    expect(lines[0]).toMatchObject({ kind: 'keel.session', version: 1, session: { id, title: 'rich (renamed)' } });
    expect(lines[0]!.session).toMatchObject({
      archivedAt: expect.any(Number),
      lastSeq: lines.length - 1 - lines.filter((l) => l.kind === 'blob').length,
    });
    // The large system prompt is stored once, as a blob, before the first header that uses it.
    const systemBlob = lines.findIndex((l) => l.kind === 'blob' && l.data === JSON.stringify(LONG_SYSTEM));
    expect(systemBlob).toBeGreaterThan(0);
    expect(lines.filter((l) => l.kind === 'blob' && l.data === JSON.stringify(LONG_SYSTEM))).toHaveLength(1);
    const headers = lines.filter((l) => l.type === 'request/header');
    expect(headers.length).toBeGreaterThan(5);
    expect(headers.every((h) => dataOf(h).system === lines[systemBlob]!.hash)).toBe(true);
    expect(lines.findIndex((l) => l.type === 'request/header')).toBeGreaterThan(systemBlob);
    for (const type of [
      'model/retry',
      'tool/call',
      'leaf/move',
      'branch/summary',
      'compaction',
      'session/updated',
      'session/archived',
    ]) {
      expect(
        lines.some((l) => l.type === type),
        type,
      ).toBe(true);
    }

    const fresh = open();
    const progress: number[] = [];
    const record = await importSession(fresh.sessions.log, text, { onProgress: (n) => progress.push(n), ids: 'keep' });
    expect(progress.at(-1)).toBe(lines.length);
    expect(record).toEqual(await sessions.get(id));
    expect(await exportText(fresh.sessions, id)).toBe(text);

    // Every projection of the imported session equals the original's.
    expect(await views(fresh.sessions, id)).toEqual(await views(sessions, id));
    expect((await verifyReplay(fresh.sessions.log, id)).ok).toBe(true);

    // An export can also be piped straight into an import, line by line.
    const piped = open();
    await importSession(piped.sessions.log, exportSession(sessions.log, id), { ids: 'keep' });
    expect(await exportText(piped.sessions, id)).toBe(text);

    // Or read as raw bytes (a file stream) whose chunks cut lines, and multi-byte characters, anywhere.
    const bytes = new TextEncoder().encode(`${text}\n`);
    async function* chunks() {
      for (let i = 0; i < bytes.length; i += 97) yield bytes.subarray(i, i + 97);
    }
    const streamed = open();
    await importSession(streamed.sessions.log, chunks(), { ids: 'keep' });
    expect(await exportText(streamed.sessions, id)).toBe(text);
  });

  it('imports under a new session id by default, also into the store it came from: the same events and tree, and its replay check passes', async () => {
    const { sessions } = open();
    const { id } = await richSession(sessions);
    const text = await exportText(sessions, id);
    const source = await sessions.get(id);
    const copies = [await importSession(sessions.log, text), await importSession(sessions.log, text)];
    expect(new Set([id, ...copies.map((c) => c.id)]).size).toBe(3);
    for (const copy of copies) {
      expect(copy).toMatchObject({
        lastSeq: source.lastSeq,
        leafId: source.leafId,
        title: source.title,
        origin: { sessionId: id, entryId: source.leafId },
      });
      // Event ids are unique within a session: they are kept, so every reference in the log stays exact.
      const strip = (events: Awaited<ReturnType<typeof allEvents>>) => events.map(({ sessionId: _s, ...e }) => e);
      expect(strip(await allEvents(sessions, copy.id))).toEqual(strip(await allEvents(sessions, id)));
      expect(await sessions.context(copy.id)).toEqual(await sessions.context(id));
      expect(await sessions.transcript(copy.id)).toEqual(await sessions.transcript(id));
      expect(await verifyReplay(sessions.log, copy.id)).toMatchObject({ ok: true, mismatches: [] });
    }
    // The tree of each is its own: a new message on one does not touch the other.
    await sessions.append(copies[0]!.id, [
      {
        type: 'user/message',
        data: { message: { id: 'm-new', role: 'user', content: [{ type: 'text', text: 'only here' }] }, via: 'input' },
      },
    ]);
    expect((await sessions.get(copies[1]!.id)).leafId).toBe(source.leafId);
    expect((await sessions.get(id)).lastSeq).toBe(source.lastSeq);
  });

  it('imports a forked session on its own, with its origin', async () => {
    const { sessions } = open();
    const { id } = await richSession(sessions);
    const entry = (await allEvents(sessions, id)).find((e) => e.type === 'assistant/message')!;
    const fork = await sessions.fork(id, entry.id, { into: 'session', title: 'forked' });
    await turn(
      sessions,
      fork.sessionId,
      agentWith(new ScriptedModel([{ text: 'in the fork' }])),
      'continue in the fork',
    );
    const text = await exportText(sessions, fork.sessionId);

    const fresh = open();
    const record = await importSession(fresh.sessions.log, text, { ids: 'keep' });
    expect(record.origin).toEqual({ sessionId: id, entryId: entry.id });
    expect(await views(fresh.sessions, fork.sessionId)).toEqual(await views(sessions, fork.sessionId));
    expect(await exportText(fresh.sessions, fork.sessionId)).toBe(text);
  });

  it('refuses to import a session that exists, and writes nothing', async () => {
    const { sessions, store } = open();
    const { id } = await richSession(sessions);
    const text = await exportText(sessions, id);

    const fresh = open();
    await importSession(fresh.sessions.log, text, { ids: 'keep' });
    const before = await views(fresh.sessions, id);
    await expect(importSession(fresh.sessions.log, text, { ids: 'keep' })).rejects.toMatchObject({
      name: 'StoreError',
      code: 'conflict',
    });
    expect(await views(fresh.sessions, id)).toEqual(before);
    expect(await fresh.store.sessions.list({ limit: 10, includeArchived: true })).toHaveLength(1);

    // Into the database it came from, too.
    const original = await views(sessions, id);
    await expect(importSession(sessions.log, text, { ids: 'keep' })).rejects.toBeInstanceOf(StoreError);
    expect(await views(sessions, id)).toEqual(original);
    expect(await store.sessions.list({ limit: 10, includeArchived: true })).toHaveLength(1);

    // Under another session id the same events are another session's: event ids are unique within a session.
    const renamed = parse(text);
    (renamed[0]!.session as { id: string }).id = 'another-id';
    const other = await importSession(sessions.log, serialize(renamed), { ids: 'keep' });
    expect(other).toMatchObject({ id: 'another-id', lastSeq: original.record.lastSeq });
    expect(await views(sessions, id)).toEqual(original);
  });

  describe('line-numbered rejection', () => {
    async function source() {
      const { sessions } = open();
      const { id } = await richSession(sessions);
      const lines = parse(await exportText(sessions, id));
      const target = open();
      const nothingWritten = async () => {
        expect(await target.store.sessions.get(id)).toBeUndefined();
        expect(await target.store.sessions.list({ limit: 10, includeArchived: true })).toEqual([]);
        expect(await target.store.events.read(id)).toEqual([]);
      };
      /** Line number (from 1) of the first line matching. */
      const lineOf = (pred: (l: Line) => boolean, after = 0) => lines.findIndex((l, i) => i + 1 > after && pred(l)) + 1;
      return { id, lines, target, nothingWritten, lineOf };
    }

    const linesOfProblems = (e: ImportError) => e.problems.map((p) => p.line);

    it('bad JSON on line 5', async () => {
      const { lines, target, nothingWritten } = await source();
      expect(lines[4]).toMatchObject({ kind: 'event', entry: false });
      const input: Array<Line | string> = [...lines];
      input[4] = '{"kind":"event","id":';
      const e = await importError(target.sessions, serialize(input));
      expect(e.problems[0]).toEqual({ line: 5, message: 'not valid JSON' });
      // ...and the header's event count no longer matches, reported at the end.
      expect(linesOfProblems(e)).toEqual([5, lines.length]);
      expect(e.problems[1]!.message).toMatch(/header says \d+ events, the file has \d+/);
      await nothingWritten();
    });

    it('a seq gap on line 8', async () => {
      const { lines, target, nothingWritten } = await source();
      expect(lines[7]).toMatchObject({ kind: 'event' });
      const seq = lines[7]!.seq!;
      const gapped = lines.map((l, i) => (i >= 7 && l.kind === 'event' ? { ...l, seq: l.seq! + 1 } : l));
      const e = await importError(target.sessions, serialize(gapped));
      expect(e.problems).toEqual([
        { line: 8, message: expect.stringContaining(`seq ${seq + 1} where ${seq} was expected`) },
      ]);
      await nothingWritten();

      // A missing line is a gap too.
      const dropped = lines.filter((_, i) => i !== 7);
      const e2 = await importError(target.sessions, serialize(dropped));
      expect(e2.problems[0]).toEqual({
        line: 8,
        message: expect.stringContaining(`seq ${seq + 1} where ${seq} was expected`),
      });
      await nothingWritten();
    });

    it('an unknown event type not marked ignorable (and an ignorable one is kept as is)', async () => {
      const { id, lines, target, nothingWritten, lineOf } = await source();
      const at = lineOf((l) => l.type === 'step/start', 10);
      const unknown = lines.map((l, i) => (i === at - 1 ? { ...l, type: 'plugin/thing', data: { x: 1 } } : l));
      const e = await importError(target.sessions, serialize(unknown));
      expect(e.problems).toEqual([{ line: at, message: expect.stringContaining('plugin/thing') }]);
      expect(e.message).toContain(`line ${at}:`);
      await nothingWritten();

      const ignorable = lines.map((l, i) =>
        i === at - 1 ? { ...l, type: 'plugin/thing', ignorable: true, data: { x: 1 } } : l,
      );
      const text = serialize(ignorable);
      await importSession(target.sessions.log, text, { ids: 'keep' });
      expect(await exportText(target.sessions, id)).toBe(text);
      expect((await allEvents(target.sessions, id)).some((ev) => (ev.type as string) === 'plugin/thing')).toBe(false);
    });

    it('a blob whose content does not match its hash', async () => {
      const { lines, target, nothingWritten, lineOf } = await source();
      const at = lineOf((l) => l.kind === 'blob');
      const bad = lines.map((l, i) =>
        i === at - 1 ? { ...l, data: JSON.stringify('You are a different assistant now.') } : l,
      );
      const e = await importError(target.sessions, serialize(bad));
      // Only the blob's line: the events that use it are not reported again.
      expect(e.problems).toEqual([
        { line: at, message: `blob content does not match its hash ${lines[at - 1]!.hash!}` },
      ]);
      await nothingWritten();

      // A blob that no line provides is reported where it is used.
      const hash = lines[at - 1]!.hash!;
      const user = lineOf((l) => JSON.stringify(l.data ?? null).includes(hash));
      const missing = lines.filter((_, i) => i !== at - 1);
      const e2 = await importError(target.sessions, serialize(missing));
      expect(e2.problems[0]).toEqual({ line: user - 1, message: expect.stringContaining(`refers to blob ${hash}`) });
      expect(blobHash(String(lines[at - 1]!.data))).toBe(hash);
      await nothingWritten();
    });

    it('a parent id that is not an earlier entry', async () => {
      const { lines, target, nothingWritten, lineOf } = await source();
      const at = lineOf((l) => l.type === 'assistant/message');
      const later = lines[lineOf((l) => l.type === 'assistant/message', at) - 1]!.id!;
      const bad = lines.map((l, i) => (i === at - 1 ? { ...l, parentId: later } : l));
      const e = await importError(target.sessions, serialize(bad));
      expect(e.problems).toEqual([{ line: at, message: `parent ${later} is not an earlier entry of this session` }]);
      await nothingWritten();
    });

    it('schema-invalid event data', async () => {
      const { lines, target, nothingWritten, lineOf } = await source();
      const at = lineOf((l) => l.type === 'step/end');
      const bad = lines.map((l, i) => (i === at - 1 ? { ...l, data: { ...dataOf(l), reason: 'exploded' } } : l));
      const e = await importError(target.sessions, serialize(bad));
      expect(e.problems).toEqual([{ line: at, message: expect.stringContaining('invalid step/end event data') }]);
      await nothingWritten();
    });

    it('all of these in one file: each reported at its own line', async () => {
      const { lines, target, nothingWritten, lineOf } = await source();
      const unknownAt = lineOf((l) => l.type === 'step/start', 10);
      const blobAt = lineOf((l) => l.kind === 'blob');
      const parentAt = lineOf((l) => l.type === 'tool/result', 10);
      const schemaAt = lineOf((l) => l.type === 'turn/end', 10);
      // A seq gap where an event follows an event (after line 5's, which is unreadable).
      const gapAt = lineOf(
        (l) => l.kind === 'event',
        lineOf((l) => l.kind === 'event', 5),
      );
      const wanted = [5, gapAt, unknownAt, blobAt, parentAt, schemaAt];
      expect(new Set(wanted).size).toBe(wanted.length);
      expect(lines[4]).toMatchObject({ kind: 'event', entry: false });

      const input: Array<Line | string> = lines.map((l, i) => {
        const n = i + 1;
        const shifted = n >= gapAt && l.kind === 'event' ? { ...l, seq: l.seq! + 1 } : l;
        if (n === unknownAt) return { ...shifted, type: 'plugin/thing' };
        if (n === blobAt) return { ...shifted, data: JSON.stringify('tampered') };
        if (n === parentAt) return { ...shifted, parentId: 'no-such-entry' };
        if (n === schemaAt) return { ...shifted, data: { ...dataOf(l), steps: -1 } };
        return shifted;
      });
      input[4] = 'not json at all';
      const e = await importError(target.sessions, serialize(input));
      expect(linesOfProblems(e)).toEqual([...wanted.sort((a, b) => a - b), lines.length]);
      await nothingWritten();
    });

    it('refuses empty input and input without a header', async () => {
      const { lines, target, nothingWritten } = await source();
      for (const empty of ['', '\n\n']) {
        const e = await importError(target.sessions, empty);
        expect(e.problems).toEqual([{ line: 1, message: 'the input is empty' }]);
      }
      const headless = await importError(target.sessions, serialize(lines.slice(1)));
      expect(headless.problems).toEqual([
        { line: 1, message: expect.stringContaining('the first line must be a keel.session header') },
      ]);
      const newer = await importError(target.sessions, serialize([{ ...lines[0]!, version: 99 }, ...lines.slice(1)]));
      expect(newer.problems).toEqual([{ line: 1, message: expect.stringContaining('version 99') }]);
      await nothingWritten();
    });
  });
});
