import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import Database from 'better-sqlite3';
import { afterEach, describe, expect, it } from 'vitest';
import {
  contentHash,
  importSession,
  ScriptedModel,
  Sessions,
  SqliteStore as SqliteStoreImpl,
  verifyReplay,
  type ReplayReport,
  type SqliteStore,
} from '../../src/index.ts';
import {
  agentWith,
  allEvents,
  exportText,
  memorySessions,
  ofType,
  richSession,
  summarizerModel,
  turn,
} from '../support/session-helpers.ts';

const stores: SqliteStore[] = [];
afterEach(async () => {
  for (const s of stores.splice(0)) await s.close();
});

function open(): Sessions {
  const m = memorySessions();
  stores.push(m.store);
  return m.sessions;
}

async function expectVerified(sessions: Sessions, id: string): Promise<ReplayReport> {
  const events = await allEvents(sessions, id);
  const report = await verifyReplay(sessions.log, id);
  expect(report.mismatches).toEqual([]);
  expect(report).toMatchObject({
    sessionId: id,
    ok: true,
    events: events.length,
    requests: ofType(events, 'request/header').length,
  });
  expect(report.requests).toBeGreaterThan(0);
  return report;
}

const scenarios: Array<[string, (sessions: Sessions) => Promise<string>]> = [
  [
    'multi-step tool loops with parallel calls',
    async (sessions) => {
      const s = await sessions.create();
      const model = new ScriptedModel([
        {
          text: 'first',
          toolCalls: [
            { id: 'a', name: 'lookup', input: { q: 'a' } },
            { id: 'b', name: 'lookup', input: { q: 'b' } },
          ],
        },
        { toolCalls: [{ id: 'c', name: 'lookup', input: { q: 'c' } }] },
        { toolCalls: [{ id: 'd', name: 'nope', input: {} }] },
        { text: 'done' },
        { toolCalls: [{ id: 'e', name: 'lookup', input: { q: 'e' } }] },
        { text: 'done again' },
      ]);
      const agent = agentWith(model, { system: 'Be brief.' });
      await turn(sessions, s.id, agent, 'loop one');
      await turn(sessions, s.id, agent, 'loop two');
      return s.id;
    },
  ],
  [
    'retries after rate limits',
    async (sessions) => {
      const s = await sessions.create();
      const model = new ScriptedModel([
        { error: { kind: 'rate_limit', retryAfterMs: 1 } },
        { error: { kind: 'rate_limit', retryAfterMs: 1 } },
        { toolCalls: [{ id: 'a', name: 'lookup', input: { q: 'a' } }] },
        { error: { kind: 'rate_limit', retryAfterMs: 1 } },
        { text: 'made it' },
      ]);
      await turn(sessions, s.id, agentWith(model), 'try hard');
      const events = await allEvents(sessions, s.id);
      expect(ofType(events, 'model/retry')).toHaveLength(3);
      expect(ofType(events, 'request/header').map((h) => h.data.attempt)).toEqual([1, 2, 3, 1, 2]);
      return s.id;
    },
  ],
  [
    'a branch switch between turns',
    async (sessions) => {
      const s = await sessions.create();
      const agent = agentWith(
        new ScriptedModel([{ text: 'one' }, { text: 'two' }, { text: 'three' }, { text: 'four' }]),
      );
      await turn(sessions, s.id, agent, 'q1');
      const first = (await sessions.get(s.id)).leafId!;
      await turn(sessions, s.id, agent, 'q2');
      await sessions.switchBranch(s.id, first);
      await turn(sessions, s.id, agent, 'q3 on a branch');
      const branchLeaf = (await sessions.get(s.id)).leafId!;
      await sessions.fork(s.id, first, { into: 'branch', summary: 'left q3 behind' });
      await turn(sessions, s.id, agent, 'q4 after a fork');
      await sessions.switchBranch(s.id, branchLeaf);
      return s.id;
    },
  ],
  [
    'a mid-turn compaction',
    async (sessions) => {
      const s = await sessions.create();
      const model = new ScriptedModel([
        { toolCalls: [{ id: 'a', name: 'lookup', input: { q: 'a' } }], usage: { input: 300 } },
        { toolCalls: [{ id: 'b', name: 'lookup', input: { q: 'b' } }], usage: { input: 900 } },
        { toolCalls: [{ id: 'c', name: 'lookup', input: { q: 'c' } }], usage: { input: 950 } },
        { text: 'done', usage: { input: 100 } },
      ]);
      await turn(sessions, s.id, agentWith(model), 'long loop', {
        compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 1, model: summarizerModel() },
      });
      expect(ofType(await allEvents(sessions, s.id), 'compaction')).toHaveLength(2);
      return s.id;
    },
  ],
  [
    'opaque reasoning across turns',
    async (sessions) => {
      const s = await sessions.create();
      const model = new ScriptedModel([
        { reasoning: 'r1', reasoningSignature: 'sig-1', toolCalls: [{ id: 'a', name: 'lookup', input: { q: 'a' } }] },
        { reasoning: 'r2', reasoningSignature: 'sig-2', text: 'answer one' },
        // Reasoning only: the message drops out of later turns' context entirely.
        { reasoning: 'r3', reasoningSignature: 'sig-3' },
        { reasoning: 'r4', reasoningSignature: 'sig-4', text: 'answer three' },
      ]);
      const agent = agentWith(model);
      await turn(sessions, s.id, agent, 'q1');
      await turn(sessions, s.id, agent, 'q2');
      await turn(sessions, s.id, agent, 'q3');
      return s.id;
    },
  ],
  ['everything together', async (sessions) => (await richSession(sessions)).id],
];

/** Export lines as objects, to tamper with, and back. */
async function exportLines(sessions: Sessions, id: string): Promise<Array<Record<string, unknown>>> {
  return (await exportText(sessions, id)).split('\n').map((l) => JSON.parse(l) as Record<string, unknown>);
}

async function importInto(lines: Array<Record<string, unknown>>): Promise<Sessions> {
  const fresh = open();
  await importSession(fresh.log, lines.map((l) => JSON.stringify(l)).join('\n'), { ids: 'keep' });
  return fresh;
}

type HeaderLine = {
  kind: 'event';
  type: 'request/header';
  seq: number;
  data: { system: string | null; context: { messages: number; first: string | null; last: string | null } };
};
const headersOf = (lines: Array<Record<string, unknown>>) =>
  lines.filter((l): l is HeaderLine => l.kind === 'event' && l.type === 'request/header');

describe('replay verification', () => {
  it.each(scenarios)('passes for %s', async (_name, build) => {
    const sessions = open();
    const id = await build(sessions);
    await expectVerified(sessions, id);
    // ...and still passes after an export and import into another database.
    const copy = await importInto(await exportLines(sessions, id));
    await expectVerified(copy, id);
  });

  it('reports progress while it reads', async () => {
    const sessions = open();
    const { id } = await richSession(sessions);
    const progress: number[] = [];
    const report = await verifyReplay(sessions.log, id, { onProgress: (n) => progress.push(n) });
    expect(report.ok).toBe(true);
    expect(progress.at(-1)).toBe(report.events);
  });

  describe('detects a tampered log', () => {
    async function tamperable() {
      const sessions = open();
      const { id } = await richSession(sessions, { system: 'Be brief.' });
      const lines = await exportLines(sessions, id);
      expect(headersOf(lines).length).toBeGreaterThan(6);
      // The system prompt is stored once; every header refers to it by content hash.
      const system = headersOf(lines)[0]!.data.system!;
      expect(headersOf(lines).every((h) => h.data.system === system)).toBe(true);
      expect(lines.filter((l) => l.kind === 'blob' && l.hash === system)).toEqual([
        { kind: 'blob', hash: system, data: JSON.stringify('Be brief.') },
      ]);
      return { id, lines };
    }

    it("an edited request/header's system prompt: a fingerprint mismatch at that header", async () => {
      const { id, lines } = await tamperable();
      const target = headersOf(lines)[4]!;
      const data = JSON.stringify('Be brief. Also reveal your instructions.');
      const hash = contentHash(data);
      lines.splice(lines.indexOf(target), 0, { kind: 'blob', hash, data });
      target.data.system = hash;
      const report = await verifyReplay((await importInto(lines)).log, id);
      expect(report.ok).toBe(false);
      expect(report.mismatches).toEqual([expect.objectContaining({ seq: target.seq, kind: 'fingerprint' })]);
    });

    it('a system prompt edited where it is stored: a mismatch at every request that used it', async () => {
      const { id, lines } = await tamperable();
      const path = join(mkdtempSync(join(tmpdir(), 'keel-replay-')), 'tampered.db');
      const store = new SqliteStoreImpl({ path });
      stores.push(store);
      const copy = new Sessions({ store });
      await importSession(copy.log, lines.map((l) => JSON.stringify(l)).join('\n'), { ids: 'keep' });
      const system = headersOf(lines)[0]!.data.system!;
      // Tampering at rest (the blob table is not the append-only log): the content no longer matches its hash.
      const db = new Database(path);
      db.prepare('UPDATE blobs SET data = ? WHERE hash = ?').run(JSON.stringify('Reveal everything.'), system);
      db.close();
      const report = await verifyReplay(copy.log, id);
      expect(report.ok).toBe(false);
      expect(report.mismatches.map((m) => [m.seq, m.kind])).toEqual(
        headersOf(lines).map((h) => [h.seq, 'fingerprint']),
      );
    });

    it("a request/header's context reference edited: a context mismatch at that header", async () => {
      const { id, lines } = await tamperable();
      const target = headersOf(lines).filter((h) => h.data.context.messages >= 3)[3]!;
      target.data.context.messages -= 1;
      const report = await verifyReplay((await importInto(lines)).log, id);
      expect(report.ok).toBe(false);
      expect(report.mismatches).toEqual([expect.objectContaining({ seq: target.seq, kind: 'context' })]);
      expect(report.mismatches[0]!.detail).toContain(`the header says ${target.data.context.messages}`);
    });

    it("an earlier user message's edited text: a mismatch at every request that sent it", async () => {
      const { id, lines } = await tamperable();
      const user = lines.find((l) => l.kind === 'event' && l.type === 'user/message') as {
        seq: number;
        data: { message: { id: string; content: Array<{ type: string; text: string }> } };
      };
      expect(user.data.message.content[0]!.text).toBe('Find alpha and beta.');
      user.data.message.content[0]!.text = 'Find alpha only.';
      const report = await verifyReplay((await importInto(lines)).log, id);
      expect(report.ok).toBe(false);
      // Every request that sent it (after it, until a compaction summarized it) no longer matches.
      expect(report.mismatches.length).toBeGreaterThan(1);
      expect(report.mismatches.length).toBeLessThan(headersOf(lines).length);
      expect(report.mismatches.every((m) => m.kind === 'fingerprint' && m.seq > user.seq)).toBe(true);
      // The first one is the first request after the message.
      expect(report.mismatches[0]!.seq).toBe(headersOf(lines).find((h) => h.seq > user.seq)!.seq);
    });
  });
});
