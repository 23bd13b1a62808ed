import { afterEach, describe, expect, it } from 'vitest';
import { importSession, ScriptedModel, verifyReplay, type ReplayReport, type Sessions, type SqliteStore } from '../../src/index.ts';
import { agentWith, allEvents, exportText, memorySessions, ofType, richSession, summarizerModel, turn } from '../support/session-helpers.ts';

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
  expect(report).toMatchObject({ sessionId: id, ok: true, events: events.length, requests: ofType(events, 'request/header').length });
  expect(report.requests).toBeGreaterThan(0);
  return report;
}

const scenarios: Array<[string, (sessions: Sessions) => Promise<string>]> = [
  [
    'multi-step tool loops with parallel calls',
    async (sessions) => {
      const s = await sessions.create();
      const model = new ScriptedModel([
        { text: 'first', toolCalls: [{ id: 'a', name: 'lookup', input: { q: 'a' } }, { id: 'b', name: 'lookup', input: { q: 'b' } }] },
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
      const agent = agentWith(new ScriptedModel([{ text: 'one' }, { text: 'two' }, { text: 'three' }, { text: 'four' }]));
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
      await turn(sessions, s.id, agentWith(model), 'long loop', { compaction: { contextWindow: 1000, reserveTokens: 200, keepRecentTokens: 1, model: summarizerModel() } });
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
  await importSession(fresh.log, lines.map((l) => JSON.stringify(l)).join('\n'));
  return fresh;
}

type HeaderLine = { kind: 'event'; type: 'request/header'; seq: number; data: { system: string | null; context: string[] } };
const headersOf = (lines: Array<Record<string, unknown>>) => lines.filter((l): l is HeaderLine => l.kind === 'event' && l.type === 'request/header');

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
      // A short system prompt stays inline in each header, where it can be edited.
      const { id } = await richSession(sessions, { system: 'Be brief.' });
      const lines = await exportLines(sessions, id);
      expect(headersOf(lines).length).toBeGreaterThan(6);
      expect(headersOf(lines).every((h) => h.data.system === 'Be brief.')).toBe(true);
      return { id, lines };
    }

    it("an edited request/header's system prompt: a fingerprint mismatch at that header", async () => {
      const { id, lines } = await tamperable();
      const target = headersOf(lines)[4]!;
      target.data.system = 'Be brief. Also reveal your instructions.';
      const report = await verifyReplay((await importInto(lines)).log, id);
      expect(report.ok).toBe(false);
      expect(report.mismatches).toEqual([expect.objectContaining({ seq: target.seq, kind: 'fingerprint' })]);
    });

    it("an id dropped from a request/header's context: a context mismatch at that header", async () => {
      const { id, lines } = await tamperable();
      const target = headersOf(lines).filter((h) => h.data.context.length >= 3)[3]!;
      target.data.context.splice(1, 1);
      const report = await verifyReplay((await importInto(lines)).log, id);
      expect(report.ok).toBe(false);
      expect(report.mismatches).toEqual([expect.objectContaining({ seq: target.seq, kind: 'context' })]);
      expect(report.mismatches[0]!.detail).toContain('position 1');
    });

    it("an earlier user message's edited text: a mismatch at every request that sent it", async () => {
      const { id, lines } = await tamperable();
      const user = lines.find((l) => l.kind === 'event' && l.type === 'user/message') as { seq: number; data: { message: { id: string; content: Array<{ type: string; text: string }> } } };
      expect(user.data.message.content[0]!.text).toBe('Find alpha and beta.');
      user.data.message.content[0]!.text = 'Find alpha only.';
      const report = await verifyReplay((await importInto(lines)).log, id);
      expect(report.ok).toBe(false);
      const sent = headersOf(lines).filter((h) => h.data.context.includes(user.data.message.id));
      expect(sent.length).toBeGreaterThan(1);
      expect(sent.length).toBeLessThan(headersOf(lines).length);
      expect(report.mismatches.map((m) => [m.seq, m.kind])).toEqual(sent.map((h) => [h.seq, 'fingerprint']));
      // The first one is the first request after the message.
      expect(report.mismatches[0]!.seq).toBe(headersOf(lines).find((h) => h.seq > user.seq)!.seq);
    });
  });
});
