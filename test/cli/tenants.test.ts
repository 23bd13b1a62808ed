/**
 * `keel tenants` (ls, show, set, rm) and `keel keys create --scope/--quota` on a database: SQLite
 * (a file) and PostgreSQL (a schema of its own). Bad flags are usage errors (exit 2) before the
 * database is touched; bad values are the store's validation errors (exit 1).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { dropSchema, freshSchema, postgresUrl } from '../support/postgres.ts';
import { keel } from './io.ts';

const backends = [
  {
    name: 'sqlite',
    open: () => {
      const dir = mkdtempSync(join(tmpdir(), 'keel-cli-tenants-'));
      return { db: join(dir, 'keel.db'), env: {}, cleanup: async () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
  {
    name: 'postgres',
    open: () => {
      const schema = freshSchema();
      return { db: postgresUrl(), env: { KEEL_DB_SCHEMA: schema }, cleanup: () => dropSchema(postgresUrl(), schema) };
    },
  },
];

describe.each(backends)('keel tenants ($name)', ({ open }) => {
  let db: string;
  let env: NodeJS.ProcessEnv;
  let cleanup: () => Promise<void>;
  const run = (...argv: string[]) => keel([...argv, '--db', db], { env });

  beforeAll(() => {
    ({ db, env, cleanup } = open());
  });
  afterAll(() => cleanup());

  it('sets, shows, lists and removes a tenant', async () => {
    expect((await run('tenants', 'ls')).out).toMatch(/no tenants in the registry/);
    const set = await run(
      'tenants',
      'set',
      'acme',
      '--weight',
      '3',
      '--quota',
      'concurrentRuns=5',
      '--quota',
      'costPerDay=2.5',
      '--on-limit',
      'fail',
      '--json',
    );
    expect(set.code).toBe(0);
    expect(JSON.parse(set.out)).toMatchObject({
      id: 'acme',
      weight: 3,
      quotas: { concurrentRuns: 5, costPerDay: 2.5, onLimit: 'fail' },
    });
    // One quota changed, one removed, the rest kept; the weight kept.
    await run('tenants', 'set', 'acme', '--quota', 'concurrentRuns=7', '--quota', 'costPerDay=none');
    const shown = await run('tenants', 'show', 'acme', '--json');
    expect(JSON.parse(shown.out)).toMatchObject({ weight: 3, quotas: { concurrentRuns: 7, onLimit: 'fail' } });
    expect(JSON.parse(shown.out).quotas).not.toHaveProperty('costPerDay');
    expect((await run('tenants', 'ls')).out).toMatch(/acme\s+weight 3\s+quotas concurrentRuns=7 onLimit=fail/);
    expect((await run('tenants', 'rm', 'acme')).code).toBe(0);
    const gone = await run('tenants', 'show', 'acme');
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/no tenant acme/);
    expect((await run('tenants', 'rm', 'acme')).code).toBe(1);
  });

  it('refuses bad flags and values with a precise message', async () => {
    for (const [argv, message] of [
      [['tenants', 'set', 'acme', '--weight', '0'], /--weight must be a whole number/],
      [['tenants', 'set', 'acme', '--quota', 'bogus=1'], /no quota bogus/],
      [['tenants', 'set', 'acme', '--quota', 'concurrentRuns'], /NAME=N/],
      [['tenants', 'set', 'acme', '--quota', 'concurrentRuns=lots'], /takes a number/],
      [['tenants', 'set', 'acme', '--on-limit', 'drop'], /wait or fail/],
      [['tenants', 'set'], /name the tenant/],
      [['tenants', 'frobnicate'], /expected ls, show, set or rm/],
      [['keys', 'create', 'acme', '--scope', 'root'], /--scope is tenant or admin/],
    ] as Array<[string[], RegExp]>) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err, argv.join(' ')).toMatch(message);
    }
    for (const [argv, message] of [
      [['tenants', 'set', 'acme', '--quota', 'concurrentRuns=1.5'], /concurrentRuns must be a whole number/],
      [['tenants', 'set', 'a b'], /tenant id/],
      [['keys', 'create', 'acme', '--quota', 'tokensPerDay=-1'], /tokensPerDay/],
    ] as Array<[string[], RegExp]>) {
      const r = await run(...argv);
      expect(r.code, argv.join(' ')).toBe(1);
      expect(r.err, argv.join(' ')).toMatch(message);
    }
    expect(JSON.parse((await run('tenants', 'ls', '--json')).out)).toEqual([]);
  });

  it('creates an admin key and a key with quotas', async () => {
    const admin = await run('keys', 'create', 'ops', '--scope', 'admin', '--json');
    expect(JSON.parse(admin.out)).toMatchObject({ tenant: 'ops', scope: 'admin', quotas: null });
    const limited = await run('keys', 'create', 'acme', '--quota', 'runsPerMinute=10', '--on-limit', 'wait');
    expect(limited.out).toMatch(/created key \S+ for tenant acme \(quotas runsPerMinute=10 onLimit=wait\)/);
    expect((await run('keys', 'list')).out).toMatch(/ops .*\[admin\]/);
  });
});
