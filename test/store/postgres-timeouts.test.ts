/**
 * The PostgreSQL store's bounds on a direct connection (ADR-0046): a statement waiting for a lock
 * past the lock timeout fails as StoreError `busy`, one running past the statement timeout as
 * `timeout` (both answered as the problem `timeout`), a slow statement is logged with its name, and
 * the store goes on after each. (Behind PgBouncer: test/store/pgbouncer.test.ts.)
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { toProblem } from '../../src/server/problems.ts';
import { StoreError } from '../../src/store/index.ts';
import type { PostgresStoreOptions } from '../../src/store/postgres/index.ts';
import { openTestPostgres } from '../support/postgres.ts';

const T0 = 1_700_000_000_000;
const note = (id: string) => ({ id, type: 'test/note', v: 1, time: T0, entry: false, data: {} });

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups) await c();
  cleanups = [];
});

/** A store, its session `s`, and a direct client holding session `s`'s row locked until `release()`. */
async function lockedSession(options: Partial<PostgresStoreOptions>) {
  const t = await openTestPostgres(options);
  cleanups.push(t.cleanup);
  await t.store.sessions.create({ id: 's', createdAt: T0 });
  const holder = new pg.Client({ connectionString: t.url });
  await holder.connect();
  cleanups.unshift(() => holder.end());
  await holder.query('BEGIN');
  await holder.query(`SELECT * FROM "${t.schema}".sessions WHERE id = 's' FOR UPDATE`);
  return { store: t.store, release: () => holder.query('ROLLBACK') };
}

describe('PostgreSQL statement and lock timeouts', () => {
  it('an append waiting for a locked session past the lock timeout fails as StoreError busy (problem timeout), and the store goes on', async () => {
    const { store, release } = await lockedSession({ lockTimeoutMs: 200 });
    const failure = await store.events.append('s', [note('a')]).catch((e: unknown) => e);
    expect(failure).toBeInstanceOf(StoreError);
    expect((failure as StoreError).code).toBe('busy');
    expect((failure as StoreError).message).toMatch(/^statement keel_[0-9a-f]{16} waited longer than its lock timeout/);
    expect(toProblem(failure).type).toBe('timeout');
    await release();
    await store.events.append('s', [note('b')]);
    expect((await store.events.read('s')).map((e) => e.id)).toEqual(['b']);
  });

  it('a statement running past the statement timeout fails as StoreError timeout, in a transaction too, which keeps nothing', async () => {
    const { store, release } = await lockedSession({ lockTimeoutMs: 0, statementTimeoutMs: 300 });
    const outside = await store.events.append('s', [note('a')]).catch((e: unknown) => e);
    expect(outside).toMatchObject({ code: 'timeout', message: expect.stringMatching(/statement timeout/) });
    const inside = await store
      .transaction(async (tx) => {
        await tx.sessions.create({ id: 'other', createdAt: T0 });
        await tx.events.append('s', [note('b')]);
      })
      .catch((e: unknown) => e);
    expect(inside).toBeInstanceOf(StoreError);
    expect((inside as StoreError).code).toBe('timeout');
    expect(toProblem(inside).type).toBe('timeout');
    await release();
    expect(await store.sessions.get('other')).toBeUndefined();
    expect(await store.events.read('s')).toEqual([]);
  });

  it('a statement slower than slowQueryMs is logged with its name and text', async () => {
    const lines: Array<{ fields: Record<string, unknown>; msg: string }> = [];
    const logger = { warn: (fields: Record<string, unknown>, msg: string) => void lines.push({ fields, msg }) };
    const { store, release } = await lockedSession({ slowQueryMs: 150, logger });
    const appended = store.events.append('s', [note('a')]);
    await new Promise((r) => setTimeout(r, 400));
    await release();
    await appended;
    const slow = lines.filter((l) => String(l.fields.sql).includes('keel_append'));
    expect(slow).toHaveLength(1);
    expect(slow[0]!.fields.statement).toMatch(/^keel_[0-9a-f]{16}$/);
    expect(slow[0]!.fields.duration_ms).toBeGreaterThanOrEqual(150);
    expect(slow[0]!.msg).toMatch(/^slow PostgreSQL statement keel_[0-9a-f]{16}: \d+ ms$/);
  });

  it('refuses timeouts that are not whole milliseconds', async () => {
    await expect(openTestPostgres({ lockTimeoutMs: -1 })).rejects.toThrow(/lockTimeoutMs must be a whole number/);
  });
});
