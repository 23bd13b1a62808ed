/**
 * Erasure leaves nothing of a session behind: after `sessions.erase`, a scan of every table of the
 * database (both backends, every column, text and bytes) finds neither the session's id nor a
 * string that was only in its content (its messages, a large message moved to a blob, tool results,
 * signal payloads, a callback's payload, a run's error in a webhook delivery's body). What may stay
 * is the tombstone, by design (docs/api.md): the sessions row and its runs' rows (ids, statuses,
 * times, agents, models, usage, cost), the erased-log marker, and the target of a schedule that
 * pointed at the session (now paused, saying why).
 */
import { randomBytes } from 'node:crypto';
import Database from 'better-sqlite3';
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  callbackFor,
  createRuntime,
  defineAgent,
  manualClock,
  openSqliteStore,
  ScriptedModel,
  tool,
  waitForSignal,
  type Runtime,
  type Store,
} from '../../src/index.ts';
import { idKey } from '../../src/store/sqlite/id-keys.ts';
import { openTestPostgres } from '../support/postgres.ts';
import { tempDbPath } from '../support/session-helpers.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

type Hit = { table: string; column: string; what: 'id' | 'content' };

/** Where the tombstone may name the session (see the file's comment). */
const TOMBSTONE: ReadonlyArray<[string, string]> = [
  ['sessions', 'id'],
  ['runs', 'session_id'],
  ['erased_logs', 'session_id'],
  ['schedules', 'target'],
];

function hitsIn(table: string, rows: Array<Record<string, unknown>>, sessionId: string, secret: string): Hit[] {
  const idText = sessionId;
  const idBytes = Buffer.from(idKey(sessionId) as Uint8Array);
  const hits: Hit[] = [];
  for (const row of rows) {
    for (const [column, v] of Object.entries(row)) {
      if (v === null || v === undefined) continue;
      const text = Buffer.isBuffer(v) ? v.toString('latin1') : typeof v === 'object' ? JSON.stringify(v) : String(v);
      const bytes = Buffer.isBuffer(v) ? v : Buffer.from(text);
      if (text.includes(secret)) hits.push({ table, column, what: 'content' });
      if (text.includes(idText) || bytes.includes(idBytes)) hits.push({ table, column, what: 'id' });
    }
  }
  return hits;
}

async function scanSqlite(path: string, sessionId: string, secret: string): Promise<Hit[]> {
  const db = new Database(path, { readonly: true });
  try {
    const tables = db
      .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")
      .pluck()
      .all() as string[];
    return tables.flatMap((t) =>
      hitsIn(t, db.prepare(`SELECT * FROM "${t}"`).all() as Array<Record<string, unknown>>, sessionId, secret),
    );
  } finally {
    db.close();
  }
}

async function scanPostgres(url: string, schema: string, sessionId: string, secret: string): Promise<Hit[]> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    const tables = (
      await c.query<{ table_name: string }>(
        'SELECT table_name FROM information_schema.tables WHERE table_schema = $1',
        [schema],
      )
    ).rows.map((r) => r.table_name);
    const hits: Hit[] = [];
    for (const t of tables)
      hits.push(
        ...hitsIn(
          t,
          (await c.query(`SELECT * FROM "${schema}"."${t}"`)).rows as Array<Record<string, unknown>>,
          sessionId,
          secret,
        ),
      );
    return hits;
  } finally {
    await c.end();
  }
}

const beyondTombstone = (hits: Hit[]) =>
  hits.filter((h) => !TOMBSTONE.some(([t, c]) => h.table === t && h.column === c));

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`erasure (${backend})`, () => {
    it(
      'a scan of every table finds neither the session’s id nor its content, beyond the tombstone',
      { timeout: 60_000 },
      async () => {
        const secret = `erase-me-${randomBytes(6).toString('hex')}`;
        let store: Store;
        let scan: (sessionId: string) => Promise<Hit[]>;
        if (backend === 'sqlite') {
          const db = tempDbPath();
          cleanups.push(() => db.cleanup());
          store = openSqliteStore({ path: db.path });
          cleanups.push(() => store.close());
          scan = (id) => scanSqlite(db.path, id, secret);
        } else {
          const pgs = await openTestPostgres();
          cleanups.push(() => pgs.cleanup());
          store = pgs.store;
          scan = (id) => scanPostgres(pgs.url, pgs.schema, id, secret);
        }
        let token = '';
        const tools = [
          tool({ name: 'echo', description: 'Echoes', input: z.object({}), execute: () => `the secret is ${secret}` }),
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
        const model = new ScriptedModel([
          {
            toolCalls: [
              { id: 'e1', name: 'echo', input: {} },
              { id: 'c1', name: 'await_ci', input: {} },
              { id: 'h1', name: 'await_hook', input: {} },
            ],
          },
          { text: `done with ${secret}` },
          // The second run fails, its error naming the secret (a webhook delivery's body carries it).
          { error: { kind: 'bad_request', message: `refused: ${secret}` } },
          // The schedule's run.
          { text: 'scheduled' },
        ]);
        const clock = manualClock();
        const rt: Runtime = createRuntime({
          store,
          agents: [defineAgent({ name: 'a', model, tools })],
          clock,
          webhooks: { allowPrivateNetworks: true },
        });
        cleanups.push(() => rt.close({ graceMs: 50 }));
        await rt.webhooks.create('default', {
          url: 'http://127.0.0.1:9/hooks',
          events: ['run.completed', 'run.failed', 'schedule.fired'],
        });
        rt.startWorker({ pollMs: 10, sweepMs: 10 });

        const s = await rt.sessions.create({ title: 'to be erased' });
        const first = (await rt.sessions.send(s.id, `hello ${secret} ${'long '.repeat(400)}${secret}`)).run;
        expect((await rt.runs.wait(first.id)).status).toBe('waiting_for_signal');
        await rt.runs.signal(first.id, 'ci', { note: secret });
        await rt.runs.callback(token, { from: 'a third party', note: secret });
        expect((await rt.runs.wait(first.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
        const second = (await rt.sessions.send(s.id, 'again')).run;
        expect((await rt.runs.wait(second.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('failed');
        const schedule = await rt.schedules.create({
          interval: { seconds: 60 },
          message: 'scheduled hello',
          target: { sessionId: s.id },
        });
        clock.advance(60_000);
        const [fire] = await rt.schedules.check();
        expect(fire).toMatchObject({ outcome: 'fired', sessionId: s.id });
        expect((await rt.runs.wait(fire!.runId!, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');

        // The scan sees the content where it is before the erasure (it is a scan that can find it).
        const before = await scan(s.id);
        const tablesWithContent = new Set(before.filter((h) => h.what === 'content').map((h) => h.table));
        for (const t of ['run_signals', 'webhook_deliveries', 'blobs']) expect(tablesWithContent, t).toContain(t);
        const tablesWithId = new Set(before.filter((h) => h.what === 'id').map((h) => h.table));
        for (const t of ['schedule_fires', 'webhook_deliveries']) expect(tablesWithId, t).toContain(t);
        expect(
          (await store.waits.findCallback((await import('../../src/runs/waits.ts')).tokenHash(token)))?.runId,
        ).toBe(first.id);

        const tomb = await rt.sessions.erase(s.id);
        expect(tomb.erasedAt).not.toBeNull();
        const after = await scan(s.id);
        expect(after.filter((h) => h.what === 'content')).toEqual([]);
        expect(beyondTombstone(after)).toEqual([]);
        expect(await rt.schedules.get(schedule.id)).toMatchObject({
          nextFireAt: null,
          pausedReason: expect.stringMatching(/erased/),
        });
      },
    );
  });
}
