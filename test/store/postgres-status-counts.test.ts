/**
 * The runs' counts by status on PostgreSQL (migration 22, ADR-0050): a status change inserts
 * delta rows and locks no counter row, so two transactions that each move several runs never
 * wait for each other; the deltas are folded into the counter rows by every process now and then,
 * concurrently, and the counts read stay exact throughout.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { RUN_STATUS_VALUES } from '../../src/store/index.ts';
import type { PostgresStore } from '../../src/store/postgres/index.ts';
import { openTestPostgres, postgresUrl } from '../support/postgres.ts';

const T0 = 1_700_000_000_000;

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.reverse()) await c();
  cleanups = [];
});

async function exactCounts(client: pg.Client, schema: string): Promise<Record<string, number>> {
  const { rows } = await client.query<{ status: string; n: string }>(
    `SELECT status, count(*) AS n FROM "${schema}".runs GROUP BY status`,
  );
  const counts = Object.fromEntries(RUN_STATUS_VALUES.map((s) => [s, 0]));
  for (const r of rows) counts[r.status] = Number(r.n);
  return counts;
}

/**
 * `runs` runs, r0, r1…, in sessions of their own; `ids` names them instead (the same number).
 */
async function setup(
  runs: number,
  ids?: string[],
): Promise<{ store: PostgresStore; client: pg.Client; schema: string; url: string }> {
  const { store, url, schema, cleanup } = await openTestPostgres({ poolSize: 8 });
  cleanups.push(cleanup);
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  cleanups.push(() => client.end());
  for (let i = 0; i < runs; i++) {
    await store.sessions.create({ id: `s${i}`, createdAt: T0 });
    await store.runs.create({
      id: ids?.[i] ?? `r${i}`,
      sessionId: `s${i}`,
      agent: { name: 'a', version: '1' },
      agentSpec: {},
      createdAt: T0 + i,
    });
  }
  return { store, client, schema, url };
}

describe('PostgreSQL: the runs counted by status', () => {
  it('a transaction that moved runs holds no counter row: another one moving runs of the same counters commits meanwhile', async () => {
    // Four run ids whose status counters share their rows (before migration 22: the same shard).
    const probe = new pg.Client({ connectionString: postgresUrl() });
    await probe.connect();
    const { rows } = await probe.query<{ id: string }>(
      `SELECT 'r' || g AS id FROM generate_series(0, 2000) g WHERE hashtext('r' || g) & 31 = hashtext('r0') & 31 ORDER BY g LIMIT 4`,
    );
    await probe.end();
    const [a, b, c, d] = rows.map((r) => r.id) as [string, string, string, string];
    const { store, client, schema } = await setup(4, [a, b, c, d]);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const first = store.transaction(async (tx) => {
      await tx.runs.update(a, { status: 'running' });
      await tx.runs.update(b, { status: 'running' });
      await held;
    });
    // Let the first take what it takes.
    await new Promise((r) => setTimeout(r, 200));
    const second = store.transaction(async (tx) => {
      await tx.runs.update(d, { status: 'running' });
      await tx.runs.update(c, { status: 'running' });
    });
    const outcome = await Promise.race([
      second.then(() => 'committed'),
      new Promise((r) => setTimeout(() => r('waiting for the first'), 2000)),
    ]);
    release();
    await Promise.all([first, second]);
    expect(outcome).toBe('committed');
    expect(await store.runs.countByStatus()).toEqual(await exactCounts(client, schema));
  });

  it('stays exact while several connections fold the deltas and runs move at the same time', async () => {
    const { store, client, schema, url } = await setup(40);
    const statuses = ['running', 'completed', 'queued', 'paused'] as const;
    const moves = (async () => {
      for (let round = 0; round < 5; round++)
        await Promise.all(
          Array.from({ length: 40 }, (_, i) =>
            store.runs.update(`r${i}`, { status: statuses[(round + i) % statuses.length]! }),
          ),
        );
    })();
    const folders = await Promise.all(
      Array.from({ length: 3 }, async () => {
        const c = new pg.Client({ connectionString: url, options: `-c search_path=${schema}` });
        await c.connect();
        cleanups.push(() => c.end());
        return c;
      }),
    );
    await Promise.all([
      moves,
      ...folders.map(async (c) => {
        for (let i = 0; i < 20; i++) await c.query('SELECT keel_fold_run_status_counts()');
      }),
    ]);
    expect(await store.runs.countByStatus()).toEqual(await exactCounts(client, schema));
    await folders[0]!.query('SELECT keel_fold_run_status_counts()');
    expect((await client.query(`SELECT count(*)::int AS n FROM "${schema}".run_status_deltas`)).rows[0].n).toBe(0);
    expect(await store.runs.countByStatus()).toEqual(await exactCounts(client, schema));
  });

  it('the store folds the deltas by itself, about once a second', async () => {
    const { store, client, schema } = await setup(3);
    await store.runs.update('r0', { status: 'running' });
    const deltas = async () =>
      (await client.query(`SELECT count(*)::int AS n FROM "${schema}".run_status_deltas`)).rows[0].n as number;
    const until = Date.now() + 5000;
    while ((await deltas()) > 0 && Date.now() < until) await new Promise((r) => setTimeout(r, 100));
    expect(await deltas()).toBe(0);
    expect(await store.runs.countByStatus()).toEqual(await exactCounts(client, schema));
  });
});
