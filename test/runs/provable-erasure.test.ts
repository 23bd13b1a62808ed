/**
 * Erasure you can prove (ADR-0041), through `rt.erasure`, on both backends: a session that touched
 * every operational table (messages, a large tool output in a blob, a signal, a callback, webhook
 * deliveries, a schedule and its fire, an idempotency record, a dataset item, flow-control rows, a
 * fork) is found by `verify` before its erasure (the negative control) and not after, but in its
 * tombstone; the audit keeps a hash of the target, never the target. A tenant's erasure leaves
 * the other tenants as they were; erase-before takes only sessions idle since before the date; an
 * erasure participant is called and scanned; bad input is refused.
 */
import { createHash, randomBytes } from 'node:crypto';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  callbackFor,
  createRuntime,
  defineAgent,
  FieldValidationError,
  manualClock,
  NotFoundError,
  ScriptedModel,
  tool,
  waitForSignal,
  type ErasureFinding,
  type ErasureParticipant,
  type ErasureTarget,
  openSqliteStore,
  type Runtime,
} from '../../src/index.ts';
import Database from 'better-sqlite3';
import { createApiKey } from '../../src/server/auth.ts';
import { openBackendStore } from '../support/backend-store.ts';
import { tempDbPath } from '../support/session-helpers.ts';
import { openTestPostgres } from '../support/postgres.ts';
import pg from 'pg';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const marker = () => `mk-${randomBytes(8).toString('hex')}`;
const sha256 = (s: string) => createHash('sha256').update(s).digest('hex');
const tablesOf = (fs: readonly ErasureFinding[]) => new Set(fs.map((f) => f.table));

/** An erasure participant keeping text by session id in memory (what an archive store would be). */
function memoryArchive(): ErasureParticipant & { kept: Map<string, string>; calls: ErasureTarget[] } {
  const kept = new Map<string, string>();
  const calls: ErasureTarget[] = [];
  return {
    name: 'archive',
    kept,
    calls,
    erase: async (target) => {
      calls.push(target);
      let n = 0;
      for (const id of target.sessionIds) if (kept.delete(id)) n++;
      return { sessions: n };
    },
    scan: async (needles) =>
      [...kept].flatMap(([id, text]) =>
        needles
          .filter((n) => id.includes(n) || text.includes(n))
          .map((needle) => ({ table: 'sessions', column: 'text', row: `id=${id}`, needle })),
      ),
  };
}

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`provable erasure (${backend})`, () => {
    async function setup(model: ScriptedModel, participants: ErasureParticipant[] = []) {
      const { store, close } = await openBackendStore(backend);
      cleanups.push(close);
      const clock = manualClock();
      let token = '';
      const secretOf: { value: string } = { value: '' };
      const tools = [
        tool({
          name: 'dump',
          description: 'A large output',
          input: z.object({}),
          execute: () => `${secretOf.value} ${'x'.repeat(4000)} ${secretOf.value}`,
        }),
        tool({
          name: 'await_ci',
          description: 'Waits for CI',
          input: z.object({}),
          execute: () => waitForSignal('ci'),
        }),
        tool({
          name: 'await_hook',
          description: 'Waits for a third party',
          input: z.object({}),
          execute: async () => {
            token = (await callbackFor('hook')).token;
            return waitForSignal('hook');
          },
        }),
      ];
      const rt: Runtime = createRuntime({
        store,
        agents: [defineAgent({ name: 'a', model, tools })],
        clock,
        webhooks: { allowPrivateNetworks: true },
        limits: { '*': { concurrency: 4, requestsPerMinute: 1000 } },
        erasureParticipants: participants,
      });
      cleanups.push(() => rt.close({ graceMs: 50 }));
      rt.startWorker({ pollMs: 10, sweepMs: 10 });
      return { rt, store, clock, secretOf, token: () => token };
    }

    /** A session of `tenant` that touches every operational table, `secret` in all of its content. */
    async function seed(
      env: Awaited<ReturnType<typeof setup>>,
      tenant: string,
      secret: string,
    ): Promise<{ sessionId: string; scheduleId: string; forkId: string }> {
      const { rt, store, clock, secretOf } = env;
      secretOf.value = secret;
      await rt.webhooks.create(tenant, {
        url: 'http://127.0.0.1:9/hooks',
        events: ['run.completed', 'run.failed', 'schedule.fired'],
      });
      const s = await rt.sessions.create({ tenant, title: `title ${secret}`, metadata: { note: secret } });
      const first = (await rt.sessions.send(s.id, `hello ${secret}`)).run;
      expect((await rt.runs.wait(first.id)).status).toBe('waiting_for_signal');
      await rt.runs.signal(first.id, 'ci', { note: secret });
      await rt.runs.callback(env.token(), { note: secret });
      expect((await rt.runs.wait(first.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
      const schedule = await rt.schedules.create({
        tenant,
        interval: { seconds: 60 },
        message: 'scheduled hello',
        target: { sessionId: s.id },
      });
      clock.advance(60_000);
      const fire = (await rt.schedules.check()).find((f) => f.scheduleId === schedule.id);
      expect(fire).toMatchObject({ outcome: 'fired', sessionId: s.id });
      expect((await rt.runs.wait(fire!.runId!, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
      await rt.schedules.pause(schedule.id);
      await rt.idempotency.put({
        tenant,
        key: `idem-${secret}`,
        fingerprint: 'POST /v1/sessions',
        status: 201,
        body: JSON.stringify({ id: s.id, title: secret }),
        createdAt: clock.now(),
      });
      await rt.evals.datasets.create({ name: 'picked runs', runs: [first.id] }, { tenant });
      // An idempotency record of the tenant that does not name the session, and a fork that names it as its origin.
      await rt.idempotency.put({
        tenant,
        key: `idem-other-${randomBytes(6).toString('hex')}`,
        fingerprint: 'POST /v1/webhooks',
        status: 201,
        body: '{}',
        createdAt: clock.now(),
      });
      const fork = await store.sessions.create({
        id: `fork-${randomBytes(6).toString('hex')}`,
        tenant,
        createdAt: Date.now(),
        origin: { sessionId: s.id, entryId: 'e' },
      });
      expect(fork.origin?.sessionId).toBe(s.id);
      return { sessionId: s.id, scheduleId: schedule.id, forkId: fork.id };
    }

    const script = () =>
      new ScriptedModel([
        {
          toolCalls: [
            { id: 'd1', name: 'dump', input: {} },
            { id: 'c1', name: 'await_ci', input: {} },
            { id: 'h1', name: 'await_hook', input: {} },
          ],
        },
        { text: 'done' },
        { text: 'scheduled' },
        {
          toolCalls: [
            { id: 'd2', name: 'dump', input: {} },
            { id: 'c2', name: 'await_ci', input: {} },
            { id: 'h2', name: 'await_hook', input: {} },
          ],
        },
        { text: 'done' },
        { text: 'scheduled' },
      ]);

    it(
      'verify finds the session and its marker everywhere before its erasure, nothing but its tombstone after; the audit keeps a hash',
      { timeout: 60_000 },
      async () => {
        const archive = memoryArchive();
        const env = await setup(script(), [archive]);
        const secret = marker();
        const { sessionId, scheduleId, forkId } = await seed(env, 'default', secret);
        archive.kept.set(sessionId, `archived ${secret}`);

        // Flow control kept rows of the model calls (grant ids and the limit's key, nothing of the session).
        expect((await env.store.limits.state('*', env.clock.now(), 3_600_000)).requests).toBeGreaterThan(0);
        // The negative control: the scan finds what is there.
        const before = await env.rt.erasure.verify({ ids: [sessionId], strings: [secret] });
        expect(before.clean).toBe(false);
        const withSecret = tablesOf(before.remnants.filter((f) => f.needle === secret));
        for (const t of ['blobs', 'run_signals', 'idempotency_keys', 'dataset_items', 'archive:sessions'])
          expect(withSecret, t).toContain(t);
        expect(withSecret.has('event_batches') || withSecret.has('events'), 'the log').toBe(true);
        const withId = tablesOf(before.remnants.filter((f) => f.needle === sessionId));
        for (const t of ['schedule_fires', 'webhook_deliveries', 'sessions', 'runs', 'schedules', 'idempotency_keys'])
          expect(withId, t).toContain(t);

        const result = await env.rt.erasure.eraseSession(sessionId);
        expect(result).toMatchObject({
          scope: 'session',
          by: 'operator',
          targetHash: sha256(`session:${sessionId}`),
          sessionIds: [sessionId],
          counts: { sessions: 1, 'archive.sessions': 1 },
        });
        expect(archive.calls).toEqual([{ scope: 'session', sessionIds: [sessionId] }]);

        const after = await env.rt.erasure.verify({ ids: [sessionId], strings: [secret] });
        expect(after.remnants).toEqual([]);
        expect(after.clean).toBe(true);
        expect(after.participants).toEqual(['archive']);
        // Its runs' ids are searched for too; what remains is its tombstone.
        expect(after.needles.length).toBeGreaterThan(2);
        expect(new Set(after.kept.map((f) => f.kept))).toContain('tombstone');
        expect(after.kept.every((f) => f.needle !== secret)).toBe(true);
        // The schedule that targeted it is paused, the fork's link to it gone.
        expect(await env.rt.schedules.get(scheduleId)).toMatchObject({ nextFireAt: null });
        expect((await env.store.sessions.get(forkId))?.origin).toBeNull();

        const [audit] = await env.rt.erasure.list();
        expect(audit).toEqual({
          id: result.id,
          scope: 'session',
          targetHash: sha256(`session:${sessionId}`),
          by: 'operator',
          at: result.at,
          counts: result.counts,
        });
        expect(JSON.stringify(audit)).not.toContain(sessionId);
      },
    );

    it(
      'a tenant erasure removes its sessions, keys’ names, schedules, webhooks, datasets and records, and leaves the other tenant as it was',
      { timeout: 60_000 },
      async () => {
        const env = await setup(script());
        const [a, b] = [marker(), marker()];
        const tenantA = `tenant-${randomBytes(4).toString('hex')}`;
        const tenantB = `tenant-${randomBytes(4).toString('hex')}`;
        const keyA = await createApiKey(env.store, {
          tenant: tenantA,
          name: `key ${a}`,
          quotas: { runsPerMinute: 1000 },
        });
        const keyB = await createApiKey(env.store, { tenant: tenantB, name: `key ${b}` });
        // The tenant's row in the registry, with quotas: its runs are charged to the ledger, counted per minute, and dispatched fairly.
        await env.rt.tenants.put({
          id: tenantA,
          name: `the tenant ${a}`,
          quotas: { tokensPerDay: 1e9, runsPerMinute: 1000 },
        });
        const sa = await seed(env, tenantA, a);
        const sb = await seed(env, tenantB, b);
        const bBefore = await env.rt.erasure.verify({ ids: [sb.sessionId], strings: [b] });

        const result = await env.rt.erasure.eraseTenant(tenantA, { by: 'admin-key-1' });
        expect(result).toMatchObject({ scope: 'tenant', by: 'admin-key-1', targetHash: sha256(`tenant:${tenantA}`) });
        // Its session and its fork.
        expect(result.counts).toMatchObject({
          sessions: 2,
          keys: 1,
          schedules: 1,
          webhooks: 1,
          datasets: 1,
          idempotencyRecords: 1,
        });
        expect(new Set(result.sessionIds)).toEqual(new Set([sa.sessionId, sa.forkId]));

        expect(result.counts).toMatchObject({ tenantRecord: 1, tenantDispatch: 1 });
        expect(result.counts.quotaCharges).toBeGreaterThan(0);
        expect(result.counts.quotaLimits).toBeGreaterThan(0);
        const afterA = await env.rt.erasure.verify({ ids: [sa.sessionId, sa.forkId], strings: [a, tenantA] });
        expect(afterA.remnants).toEqual([]);
        expect(await env.rt.tenants.get(tenantA)).toBeUndefined();
        const keyRow = (await env.store.keys.list(tenantA)).find((k) => k.id === keyA.key.id);
        expect(keyRow).toMatchObject({ name: null, revokedAt: expect.any(Number) });
        expect(await env.rt.schedules.list({ tenant: tenantA })).toEqual([]);

        // The other tenant: as it was.
        const bAfter = await env.rt.erasure.verify({ ids: [sb.sessionId], strings: [b] });
        expect(bAfter.remnants).toEqual(bBefore.remnants);
        expect((await env.store.keys.list(tenantB)).find((k) => k.id === keyB.key.id)).toMatchObject({
          name: `key ${b}`,
          revokedAt: null,
        });
        expect(await env.rt.sessions.get(sb.sessionId)).toMatchObject({ erasedAt: null });
        expect(await env.rt.schedules.list({ tenant: tenantB })).toHaveLength(1);
      },
    );

    it(
      'erase-before takes only the sessions idle since before the date: not a newer one, not one whose run still waits (a manual clock)',
      { timeout: 60_000 },
      async () => {
        const env = await setup(
          new ScriptedModel([
            { toolCalls: [{ id: 'c1', name: 'await_ci', input: {} }] },
            { text: 'old' },
            { text: 'new' },
          ]),
        );
        // As old, but its run still waits: not idle.
        const busy = await env.rt.sessions.create({ title: 'busy' });
        const busyRun = (await env.rt.sessions.send(busy.id, 'busy message')).run;
        expect((await env.rt.runs.wait(busyRun.id)).status).toBe('waiting_for_signal');
        const old = await env.rt.sessions.create({ title: 'old' });
        const oldRun = (await env.rt.sessions.send(old.id, 'old message')).run;
        await env.rt.runs.wait(oldRun.id, { until: 'terminal', timeoutMs: 10_000 });
        // Sessions and runs are stamped with the wall clock; the runtime's (manual) clock stamps the audit.
        await new Promise((r) => setTimeout(r, 20));
        const cutoff = Date.now();
        await new Promise((r) => setTimeout(r, 20));
        env.clock.advance(10 * 86_400_000);
        const recent = await env.rt.sessions.create({ title: 'recent' });
        const recentRun = (await env.rt.sessions.send(recent.id, 'recent message')).run;
        await env.rt.runs.wait(recentRun.id, { until: 'terminal', timeoutMs: 10_000 });

        const result = await env.rt.erasure.eraseBefore(cutoff);
        expect(result.sessionIds).toEqual([old.id]);
        expect(result).toMatchObject({
          scope: 'before',
          targetHash: sha256(`before:${new Date(cutoff).toISOString()}`),
          at: env.clock.now(),
          counts: { sessions: 1 },
        });
        expect((await env.store.sessions.get(old.id))?.erasedAt).not.toBeNull();
        expect((await env.store.sessions.get(recent.id))?.erasedAt).toBeNull();
        expect((await env.store.sessions.get(busy.id))?.erasedAt).toBeNull();
        expect((await env.rt.erasure.verify({ ids: [old.id], strings: ['old message'] })).remnants).toEqual([]);
        expect((await env.rt.erasure.verify({ strings: ['recent message'] })).clean).toBe(false);
        // Again: nothing more to erase.
        expect((await env.rt.erasure.eraseBefore(cutoff)).sessionIds).toEqual([]);
      },
    );

    it('purge says what the store did about physical copies, and what it cannot do', async () => {
      const env = await setup(new ScriptedModel([]));
      if (backend === 'sqlite') {
        expect(await env.rt.erasure.purge()).toBe('an in-memory database: nothing on disk');
      } else {
        expect(await env.rt.erasure.purge()).toMatch(/^dead row versions stay in the table files until VACUUM/);
        expect(await env.rt.erasure.purge({ vacuum: true })).toMatch(
          /^every table was vacuumed .*WAL segments and backups/,
        );
      }
    });

    it('refuses bad input: no needle, a needle too short, an unknown session, another tenant’s session', async () => {
      const env = await setup(new ScriptedModel([]));
      await expect(env.rt.erasure.verify({})).rejects.toBeInstanceOf(FieldValidationError);
      await expect(env.rt.erasure.verify({ strings: ['ab'] })).rejects.toThrow(/shorter than 4/);
      await expect(env.rt.erasure.eraseSession('no-such-session')).rejects.toBeInstanceOf(NotFoundError);
      const s = await env.rt.sessions.create({ tenant: 'one' });
      await expect(env.rt.erasure.eraseSession(s.id, { tenant: 'two' })).rejects.toBeInstanceOf(NotFoundError);
      await expect(env.rt.erasure.eraseBefore(Number.NaN)).rejects.toBeInstanceOf(FieldValidationError);
      await expect(env.rt.erasure.eraseTenant('')).rejects.toBeInstanceOf(FieldValidationError);
      expect((await env.store.sessions.get(s.id))?.erasedAt).toBeNull();
      expect(await env.rt.erasure.list()).toEqual([]);
    });
  });
}

describe('provable erasure (sqlite): the log compressed', () => {
  it(
    'verify finds a marker inside a Zstandard-sealed row of the log (decompressed); once erased, in the file’s free space only until it is vacuumed',
    { timeout: 30_000 },
    async () => {
      const db = tempDbPath();
      cleanups.push(() => db.cleanup());
      const store = openSqliteStore({ path: db.path });
      cleanups.push(() => store.close());
      const rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model: new ScriptedModel([]) })] });
      cleanups.push(() => rt.close({ graceMs: 50 }));
      const secret = marker();
      const s = await rt.sessions.create({});
      for (let i = 0; i < 120; i++) await rt.sessions.appendUserMessage(s.id, `${i} ${secret} ${'words '.repeat(40)}`);
      await store.events.seal(s.id);
      const raw = new Database(db.path, { readonly: true });
      const codecs = raw.prepare('SELECT codec, CAST(data AS BLOB) AS data FROM event_batches').all() as Array<{
        codec: number;
        data: Buffer;
      }>;
      raw.close();
      // Sealed with Zstandard: the marker is not in the row's bytes as they are.
      expect(codecs.map((r) => r.codec)).toEqual([4]);
      expect(codecs[0]!.data.includes(secret)).toBe(false);

      const before = await rt.erasure.verify({ strings: [secret] });
      expect(before.remnants).toEqual([
        expect.objectContaining({ table: 'event_batches', column: 'data', needle: secret }),
      ]);
      const erased = await rt.erasure.eraseSession(s.id);
      expect(erased.physical).toBe('the WAL was checkpointed into the database file and truncated');
      // No row holds it; the file's free space still does: sealing deleted the open rows it
      // replaced without zeroing them (only an erasure's own deletes do).
      const after = await rt.erasure.verify({ ids: [s.id], strings: [secret] });
      expect(after.remnants).toEqual([
        expect.objectContaining({ table: '(database file)', column: 'bytes', needle: secret }),
      ]);
      expect(await rt.erasure.purge({ vacuum: true })).toBe(
        'the database file was rebuilt (VACUUM); the WAL was checkpointed into the database file and truncated',
      );
      const vacuumed = await rt.erasure.verify({ ids: [s.id], strings: [secret] });
      expect(vacuumed.remnants).toEqual([]);
      expect(vacuumed.clean).toBe(true);
    },
  );

  it('verify finds in the file’s bytes what a delete without secure_delete left (the physical negative control)', async () => {
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const store = openSqliteStore({ path: db.path });
    cleanups.push(() => store.close());
    const rt = createRuntime({ store, agents: [defineAgent({ name: 'a', model: new ScriptedModel([]) })] });
    cleanups.push(() => rt.close({ graceMs: 50 }));
    const secret = marker();
    const raw = new Database(db.path);
    raw.pragma('secure_delete = OFF');
    raw.exec('CREATE TABLE scratch (x TEXT)');
    raw.prepare('INSERT INTO scratch (x) VALUES (?)').run(`left behind ${secret}`);
    expect((await rt.erasure.verify({ strings: [secret] })).remnants).toEqual([
      { table: 'scratch', column: 'x', row: 'rowid=1', needle: secret },
    ]);
    raw.exec('DELETE FROM scratch');
    raw.close();
    const after = await rt.erasure.verify({ strings: [secret] });
    expect(after.clean).toBe(false);
    expect(after.remnants).toEqual([
      expect.objectContaining({
        table: expect.stringMatching(/^\((database|WAL) file\)$/),
        column: 'bytes',
        needle: secret,
      }),
    ]);
    await rt.erasure.purge({ vacuum: true });
    expect((await rt.erasure.verify({ strings: [secret] })).clean).toBe(true);
  });
});

describe('provable erasure: a table added later is searched too (the catalog)', () => {
  it('SQLite and PostgreSQL: a marker in a table Keel does not know, text and bytes', async () => {
    const secret = marker();
    // SQLite: a file, another connection adds the table.
    const db = tempDbPath();
    cleanups.push(() => db.cleanup());
    const sqlite = openSqliteStore({ path: db.path });
    cleanups.push(() => sqlite.close());
    const raw = new Database(db.path);
    raw.exec('CREATE TABLE later_notes (k TEXT PRIMARY KEY, note TEXT, bytes BLOB)');
    raw
      .prepare('INSERT INTO later_notes VALUES (?, ?, ?)')
      .run('n1', `a note ${secret}`, Buffer.from(`bytes ${secret}`));
    raw.close();
    expect(await sqlite.erasure.scan([secret])).toEqual([
      { table: 'later_notes', column: 'note', row: 'k=n1', needle: secret },
      { table: 'later_notes', column: 'bytes', row: 'k=n1', needle: secret },
    ]);
    // PostgreSQL: the store's schema, a table added by hand.
    const pgs = await openTestPostgres();
    cleanups.push(() => pgs.cleanup());
    const client = new pg.Client({ connectionString: pgs.url });
    await client.connect();
    try {
      await client.query(`CREATE TABLE "${pgs.schema}".later_notes (k text PRIMARY KEY, note jsonb, bytes bytea)`);
      await client.query(`INSERT INTO "${pgs.schema}".later_notes VALUES ($1, $2, $3)`, [
        'n1',
        JSON.stringify({ note: secret }),
        Buffer.from(`bytes ${secret}`),
      ]);
    } finally {
      await client.end();
    }
    expect(await pgs.store.erasure.scan([secret])).toEqual([
      { table: 'later_notes', column: 'note', row: 'k=n1', needle: secret },
      { table: 'later_notes', column: 'bytes', row: 'k=n1', needle: secret },
    ]);
  });
});
