/**
 * Retention through the runtime, on both backends: a manual clock moves 400 days and exactly the
 * sessions a policy names are archived, then deleted; an archive round trip (a directory, a local
 * S3 server) keeps every id and passes the replay check; operational tables are pruned; one
 * sweeper leads; bad input is refused with a precise error.
 */
import { createHash } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  manualClock,
  ScriptedModel,
  tool,
  waitForSignal,
  type Runtime,
  type RetentionOptions,
  type Store,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';
import { directoryArchive, s3Archive, type TestArchive } from './archive-stores.ts';

const DAY = 86_400_000;
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const tools = [
  tool({
    name: 'lookup',
    description: 'Looks up',
    input: z.object({ q: z.string() }),
    execute: ({ q }) => `found ${q}`,
  }),
  tool({ name: 'await_ci', description: 'Waits for CI', input: z.object({}), execute: () => waitForSignal('ci') }),
];

/** A model that answers every call: a tool call on a message that asks for one, then text. */
function model(): ScriptedModel {
  let n = 0;
  return new ScriptedModel(
    [
      (call) => {
        const last = call.prompt.at(-1)!;
        if (last.role === 'tool') return { text: 'done' };
        const text = JSON.stringify(last.content);
        if (text.includes('wait for ci')) return { toolCalls: [{ id: `w${++n}`, name: 'await_ci', input: {} }] };
        if (text.includes('look up'))
          return { toolCalls: [{ id: `l${++n}`, name: 'lookup', input: { q: 'weather' } }] };
        return { text: 'done' };
      },
    ],
    { loop: true },
  );
}

async function setup(backend: 'sqlite' | 'postgres', retention: RetentionOptions) {
  const { store, close } = await openBackendStore(backend);
  cleanups.push(close);
  const clock = manualClock();
  const rt: Runtime = createRuntime({
    store,
    agents: [defineAgent({ name: 'a', model: model(), tools }), defineAgent({ name: 'b', model: model(), tools })],
    clock,
    retention,
  });
  cleanups.push(() => rt.close({ graceMs: 50 }));
  rt.startWorker({ pollMs: 10 });
  return { store, rt, clock };
}

async function conversation(rt: Runtime, o: { tenant?: string; agent?: string; message?: string } = {}) {
  const s = await rt.sessions.create({
    title: 'old',
    ...(o.tenant ? { tenant: o.tenant } : {}),
  });
  const run = (
    await rt.sessions.send(s.id, o.message ?? 'please look up the weather', o.agent ? { agent: o.agent } : {})
  ).run;
  await rt.runs.wait(run.id, { until: o.message?.includes('wait for ci') ? 'settled' : 'terminal', timeoutMs: 10_000 });
  return s.id;
}

async function exportOf(rt: Runtime, id: string): Promise<string> {
  const lines: string[] = [];
  for await (const l of rt.sessions.export(id)) lines.push(l);
  return lines.join('\n');
}

const sorted = (ids: readonly string[]) => [...ids].sort();

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`retention (${backend})`, () => {
    it('over 400 days, archives then deletes exactly the sessions its policies name', { timeout: 60_000 }, async () => {
      const archive = directoryArchive();
      cleanups.push(archive.close);
      const { rt, clock, store } = await setup(backend, {
        archive: archive.store,
        settings: {
          sessions: { archiveAfterDays: 90, deleteAfterDays: 180 },
          tenants: { keep: { archiveAfterDays: null } },
          agents: { b: { deleteAfterDays: null } },
        },
      });
      // A tenant's own policy, by API: shorter.
      await rt.retention.putPolicy('short', null, { archiveAfterDays: 30, deleteAfterDays: 30 });

      const plain = await conversation(rt);
      const kept = await conversation(rt, { tenant: 'keep' });
      const short = await conversation(rt, { tenant: 'short' });
      // Created for no agent: its latest run's agent is what per-agent policies go by.
      const agentB = await conversation(rt, { agent: 'b' });
      const busy = await conversation(rt, { message: 'please wait for ci' });
      expect((await rt.runs.list({ sessionId: busy }))[0]!.status).toBe('waiting_for_signal');

      const sweep = async () => {
        const plan = await rt.retention.sweep({ dryRun: true });
        const done = await rt.retention.sweep();
        // The dry run said exactly what the sweep then did.
        expect(sorted(plan.sessions.archivedIds)).toEqual(sorted(done.sessions.archivedIds));
        expect(sorted(plan.sessions.deletedIds)).toEqual(sorted(done.sessions.deletedIds));
        expect(done.sessions.errors).toEqual([]);
        return { archived: sorted(done.sessions.archivedIds), deleted: sorted(done.sessions.deletedIds) };
      };

      expect(await sweep()).toEqual({ archived: [], deleted: [] });
      clock.advance(50 * DAY);
      expect(await sweep()).toEqual({ archived: [short], deleted: [] });
      clock.advance(50 * DAY); // day 100
      expect(await sweep()).toEqual({ archived: sorted([plain, agentB]), deleted: [short] });
      clock.advance(300 * DAY); // day 400
      expect(await sweep()).toEqual({ archived: [], deleted: [plain] });

      // What each is now.
      for (const id of [plain, short]) {
        const s = (await store.sessions.get(id))!;
        expect(s.erasedAt, id).not.toBeNull();
        expect(await rt.retention.archiveOf(id)).toBeUndefined();
      }
      expect((await rt.retention.archiveOf(agentB))?.key).toMatch(/^sessions\/default\/.+\.jsonl\.gz$/);
      expect(await archive.store.list()).toEqual([(await rt.retention.archiveOf(agentB))!.key]);
      for (const id of [kept, busy]) {
        const s = (await store.sessions.get(id))!;
        expect(s.erasedAt, id).toBeNull();
        expect(s.inArchiveAt, id).toBeNull();
        expect((await rt.sessions.get(id)).lastSeq).toBeGreaterThan(0);
      }
      // A session in the archive answers a clear refusal, to reads and to messages.
      await expect(rt.sessions.get(agentB)).rejects.toMatchObject({ code: 'session_in_archive' });
      await expect(rt.sessions.send(agentB, 'hello?', { agent: 'b' })).rejects.toMatchObject({
        code: 'session_in_archive',
      });
      // Erasing it removes its archive too.
      await rt.sessions.erase(agentB);
      expect(await archive.store.list()).toEqual([]);
      expect(await rt.retention.archiveOf(agentB)).toBeUndefined();
    });

    for (const kind of ['directory', 's3'] as const) {
      it(
        `a session archived to ${kind === 's3' ? 'a local S3 server' : 'a directory'} comes back with every id, and its replay check passes`,
        { timeout: 60_000 },
        async () => {
          const archive: TestArchive = kind === 'directory' ? directoryArchive() : await s3Archive();
          cleanups.push(archive.close);
          const { rt, store } = await setup(backend, { archive: archive.store });
          const id = await conversation(rt);
          const second = (await rt.sessions.send(id, 'look up again')).run;
          await rt.runs.wait(second.id, { until: 'terminal', timeoutMs: 10_000 });
          const before = await exportOf(rt, id);
          const runsBefore = (await rt.runs.list({ sessionId: id })).map((r) => r.id);
          expect((await rt.sessions.verifyReplay(id)).ok).toBe(true);

          const a = await rt.retention.archive(id);
          expect(a.events).toBe(JSON.parse(before.split('\n')[0]!).session.lastSeq);
          expect(await archive.store.list()).toEqual([a.key]);
          expect(await store.events.read(id, { afterSeq: 0, limit: 10 })).toEqual([]);
          await expect(rt.sessions.verifyReplay(id)).rejects.toMatchObject({ code: 'session_in_archive' });

          expect(await rt.retention.restore(id)).toEqual({ sessionId: id, events: a.events });
          expect(await exportOf(rt, id)).toBe(before);
          const report = await rt.sessions.verifyReplay(id);
          expect(report.ok).toBe(true);
          expect(report.requests).toBeGreaterThan(1);
          expect((await rt.runs.list({ sessionId: id })).map((r) => r.id)).toEqual(runsBefore);
          expect(await archive.store.list()).toEqual([]);
          // It goes on where it was.
          const third = (await rt.sessions.send(id, 'and once more')).run;
          expect((await rt.runs.wait(third.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
          expect((await rt.sessions.verifyReplay(id)).ok).toBe(true);
        },
      );
    }

    it(
      'an erasure removes an archived session’s archive, and verify reads the archives: the marker there before, nowhere after',
      { timeout: 30_000 },
      async () => {
        const archive = directoryArchive();
        cleanups.push(archive.close);
        const { rt } = await setup(backend, { archive: archive.store });
        const marker = `mk-${Math.random().toString(36).slice(2, 12)}`;
        const id = await conversation(rt, { message: `please look up the weather for ${marker}` });
        const other = await conversation(rt);
        await rt.retention.archive(id);
        await rt.retention.archive(other);
        const before = await rt.erasure.verify({ ids: [id], strings: [marker] });
        expect(before.remnants.filter((f) => f.table.startsWith('archives:'))).toEqual(
          expect.arrayContaining([expect.objectContaining({ column: 'content', needle: marker })]),
        );
        const result = await rt.erasure.eraseSession(id);
        expect(result.sessionIds).toEqual([id]);
        expect(await rt.retention.archiveOf(id)).toBeUndefined();
        const after = await rt.erasure.verify({ ids: [id], strings: [marker] });
        expect(after.remnants).toEqual([]);
        // The other session's archive is still there, and restores.
        expect(await archive.store.list()).toHaveLength(1);
        expect((await rt.retention.restore(other)).sessionId).toBe(other);
      },
    );

    it(
      'a large payload goes to the archive with its session (its kept head too) and comes back with its media type',
      { timeout: 30_000 },
      async () => {
        const archive = directoryArchive();
        cleanups.push(archive.close);
        const { rt, store } = await setup(backend, { archive: archive.store });
        const big = `weather report ${'x'.repeat(300 * 1024)}`;
        const id = await conversation(rt, { message: big });
        const hash = `sha256:${createHash('sha256').update(big).digest('hex')}`;
        expect((await store.events.blobInfo([hash])).get(hash)).toMatchObject({
          mediaType: 'text/plain; charset=utf-8',
        });
        expect(await store.events.blobHead(hash, 10)).toBe('weather re');
        await rt.retention.archive(id);
        expect((await store.events.blobInfo([hash])).size).toBe(0);
        expect(await store.events.blobHead(hash, 10)).toBeUndefined();
        await rt.retention.restore(id);
        expect((await store.events.blobInfo([hash])).get(hash)).toMatchObject({
          mediaType: 'text/plain; charset=utf-8',
        });
        expect((await rt.sessions.verifyReplay(id)).ok).toBe(true);
      },
    );

    it('prunes finished rows of the operational tables by their periods', { timeout: 30_000 }, async () => {
      const { rt, clock } = await setup(backend, { settings: { tables: { schedule_fires: null } } });
      const now = clock.now();
      await rt.idempotency.put({
        tenant: 'default',
        key: 'k1',
        fingerprint: 'f',
        status: 200,
        body: '{}',
        createdAt: now,
      });
      clock.advance(8 * DAY);
      await rt.idempotency.put({
        tenant: 'default',
        key: 'k2',
        fingerprint: 'f',
        status: 200,
        body: '{}',
        createdAt: clock.now(),
      });
      const plan = await rt.retention.sweep({ dryRun: true });
      expect(plan.tables.idempotency).toEqual({ days: 7, rows: 1 });
      expect(plan.tables.schedule_fires).toEqual({ days: null, rows: 0 });
      expect(await rt.idempotency.get('default', 'k1')).toBeDefined();
      const done = await rt.retention.sweep();
      expect(done.tables.idempotency).toEqual({ days: 7, rows: 1 });
      expect(await rt.idempotency.get('default', 'k1')).toBeUndefined();
      expect(await rt.idempotency.get('default', 'k2')).toBeDefined();
    });

    it(
      'prunes schedule fires and the signals of runs that ended, not those of a waiting run',
      { timeout: 30_000 },
      async () => {
        const { rt, clock, store } = await setup(backend, {});
        const target = await conversation(rt);
        const schedule = await rt.schedules.create({
          interval: { seconds: 60 },
          message: 'tick',
          target: { sessionId: target },
        });
        clock.advance(60_000);
        const [fire] = await rt.schedules.check();
        await rt.runs.wait(fire!.runId!, { until: 'terminal', timeoutMs: 10_000 });
        await rt.schedules.pause(schedule.id);
        const done = await conversation(rt, { message: 'please wait for ci' });
        const [doneRun] = await rt.runs.list({ sessionId: done });
        await rt.runs.signal(doneRun!.id, 'ci', { ok: true });
        expect((await rt.runs.wait(doneRun!.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
        const waiting = await conversation(rt, { message: 'please wait for ci' });
        const [waitingRun] = await rt.runs.list({ sessionId: waiting });
        await rt.runs.signal(waitingRun!.id, 'other', { early: true });
        expect(await store.waits.countSignals(waitingRun!.id)).toBe(1);

        clock.advance(31 * DAY);
        const first = await rt.retention.sweep();
        expect(first.tables.signals).toEqual({ days: 30, rows: 1 });
        expect(first.tables.schedule_fires).toEqual({ days: 90, rows: 0 });
        expect(await store.waits.countSignals(doneRun!.id)).toBe(0);
        expect(await store.waits.countSignals(waitingRun!.id)).toBe(1);
        clock.advance(60 * DAY);
        expect((await rt.retention.sweep({ dryRun: true })).tables.schedule_fires).toEqual({ days: 90, rows: 1 });
        expect((await rt.retention.sweep()).tables.schedule_fires).toEqual({ days: 90, rows: 1 });
        expect(await rt.schedules.fires(schedule.id)).toEqual([]);
      },
    );

    it('the sweeper of a runtime with a worker sweeps by itself, every interval', { timeout: 30_000 }, async () => {
      const archive = directoryArchive();
      cleanups.push(archive.close);
      const { rt, clock } = await setup(backend, {
        archive: archive.store,
        settings: { sessions: { archiveAfterDays: 10 } },
        intervalMs: 50,
      });
      const swept: number[] = [];
      rt.retention.observe({ swept: (r) => swept.push(r.sessions.archived) });
      const id = await conversation(rt);
      clock.advance(11 * DAY);
      // Its sweep ends (the tables pruned after the sessions) a little after the session is archived.
      for (let i = 0; i < 200 && !swept.includes(1); i++) await new Promise((r) => setTimeout(r, 25));
      expect((await rt.retention.archiveOf(id))?.sessionId).toBe(id);
      expect(swept).toContain(1);
      expect(rt.retention.lastSweep).toBeDefined();
    });

    it('one sweeper leads across runtimes on the store', { timeout: 30_000 }, async () => {
      const { store, rt } = await setup(backend, { leaseMs: 60_000 });
      const other = createRuntime({ store: store as Store, agents: [defineAgent({ name: 'a', model: model() })] });
      cleanups.push(() => other.close());
      expect(await rt.retention.tick()).toBeDefined();
      expect(await other.retention.tick()).toBeUndefined();
      expect(await rt.retention.tick()).toBeDefined();
      await rt.retention.stop();
      rt.retention.start();
      await rt.retention.stop(); // gives the lease up
      expect(await other.retention.tick()).toBeDefined();
    });

    it('refuses what it cannot do, precisely', { timeout: 30_000 }, async () => {
      const { rt } = await setup(backend, { settings: { sessions: { archiveAfterDays: 1 } } });
      await expect(rt.retention.putPolicy('t', null, { keepRuns: 5 })).rejects.toMatchObject({
        code: 'invalid_retention_policy',
        field: 'policy.keepRuns',
        message: expect.stringContaining('ADR-0044'),
      });
      await expect(rt.retention.putPolicy('t', null, { archiveAfterDays: -1 })).rejects.toMatchObject({
        code: 'invalid_retention_policy',
        field: 'policy.archiveAfterDays',
      });
      await expect(rt.retention.putPolicy('t', null, { archive: 3 })).rejects.toMatchObject({
        field: 'policy.archive',
      });
      await expect(rt.retention.putPolicy('t', null, 'often')).rejects.toMatchObject({ field: 'policy' });
      // No archive store: a sweep that would archive fails, its dry run still tells.
      await expect(rt.retention.sweep()).rejects.toMatchObject({ code: 'no_archive_store' });
      expect((await rt.retention.sweep({ dryRun: true })).sessions.archived).toBe(0);
      const id = await conversation(rt);
      await expect(rt.retention.restore(id)).rejects.toMatchObject({ code: 'not_in_archive' });
      await expect(rt.retention.restore('nope')).rejects.toMatchObject({ code: 'not_found' });
      await expect(rt.retention.archive(id)).rejects.toMatchObject({ code: 'no_archive_store' });
      // A policy set is read back, and resolves.
      await rt.retention.putPolicy('t', 'a', { deleteAfterDays: 10 });
      expect(await rt.retention.effectivePolicy('t', 'a')).toEqual({ archiveAfterDays: 1, deleteAfterDays: 10 });
      expect((await rt.retention.listPolicies('t')).map((p) => p.agent)).toEqual(['a']);
      expect(await rt.retention.deletePolicy('t', 'a')).toBe(true);
      expect(await rt.retention.deletePolicy('t', 'a')).toBe(false);
    });
  });
}
