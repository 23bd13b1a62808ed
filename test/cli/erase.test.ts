/**
 * `keel erase` (ADR-0041) on a database filled through the library, SQLite and PostgreSQL: verify
 * alone finds a marker before the erasure (exit 1, each place listed), erase --verify finds nothing
 * after (exit 0); a tenant and a date; the audit; usage errors (exit 2).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { defineAgent } from '../../src/core/index.ts';
import { ScriptedModel } from '../../src/model/index.ts';
import { createRuntime } from '../../src/runs/index.ts';
import type { Store } from '../../src/store/index.ts';
import { openSqliteStore } from '../../src/store/sqlite/index.ts';
import { openPostgresStore } from '../../src/store/postgres/index.ts';
import { dropSchema, freshSchema, postgresUrl } from '../support/postgres.ts';
import { keel } from './io.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** A database (its `keel` env) and a way to fill it through the library. */
async function database(backend: 'sqlite' | 'postgres'): Promise<{ env: NodeJS.ProcessEnv; open(): Promise<Store> }> {
  if (backend === 'sqlite') {
    const dir = mkdtempSync(join(tmpdir(), 'keel-erase-'));
    cleanups.push(() => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keel.db');
    return { env: { KEEL_DB: path }, open: async () => openSqliteStore({ path }) };
  }
  const schema = freshSchema();
  cleanups.push(() => dropSchema(postgresUrl(), schema));
  return {
    env: { KEEL_DB: postgresUrl(), KEEL_DB_SCHEMA: schema },
    open: () => openPostgresStore({ url: postgresUrl(), schema }),
  };
}

/** Sessions with a completed run each, in `tenant`, their messages holding `marker`. */
async function fill(
  open: () => Promise<Store>,
  sessions: Array<{ tenant: string; marker: string }>,
): Promise<string[]> {
  const store = await open();
  const rt = createRuntime({
    store,
    agents: [defineAgent({ name: 'a', model: new ScriptedModel([{ text: 'ok' }], { loop: true }) })],
  });
  rt.startWorker({ pollMs: 10 });
  try {
    const ids: string[] = [];
    for (const s of sessions) {
      const session = await rt.sessions.create({ tenant: s.tenant });
      const { run } = await rt.sessions.send(session.id, `hello ${s.marker}`);
      expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
      ids.push(session.id);
    }
    return ids;
  } finally {
    await rt.close({ graceMs: 50 });
    await store.close();
  }
}

const marker = () => `mk-${randomBytes(6).toString('hex')}`;

for (const backend of ['sqlite', 'postgres'] as const) {
  describe(`keel erase (${backend})`, () => {
    it(
      'verify finds the marker before, erase --session --verify finds nothing after; the audit lists it',
      { timeout: 30_000 },
      async () => {
        const { env, open } = await database(backend);
        const m = marker();
        const [id] = await fill(open, [{ tenant: 'default', marker: m }]);

        const before = await keel(['erase', '--verify', '--id', id!, '--string', m], { env });
        expect(before.code).toBe(1);
        expect(before.out).toMatch(/^verify: FOUND \d+ remnants? in every table of the store:/);
        expect(before.out).toContain(`: ${m}`);

        const erased = await keel(['erase', '--session', id!, '--verify', '--string', m], { env });
        expect(erased.err).toBe('');
        expect(erased.code).toBe(0);
        expect(erased.out).toMatch(
          new RegExp(
            `^erased 1 session \\(session; erasure \\S+, audit target sha256 [0-9a-f]{64}\\)\\n  sessions 1\\n  on disk: [^\\n]+\\n`,
          ),
        );
        expect(erased.out).toMatch(/verify: \d+ ids and strings searched in every table of the store: nothing found\n/);
        expect(erased.out).toMatch(
          /\n {2}kept by design \(ids only\): erased log marker ×1, tombstone's run \(billing\) ×2, tombstone ×1\n$/,
        );

        const audit = await keel(['erase', '--audit', '--json'], { env });
        expect(audit.code).toBe(0);
        const [record] = JSON.parse(audit.out);
        expect(record).toMatchObject({ scope: 'session', by: 'operator', counts: { sessions: 1 } });
        expect(audit.out).not.toContain(id!);
      },
    );

    it('erases a tenant (the other stays) and by date, as JSON', { timeout: 30_000 }, async () => {
      const { env, open } = await database(backend);
      const [a, b] = [marker(), marker()];
      const [inA, inB] = await fill(open, [
        { tenant: 'tenant-a', marker: a },
        { tenant: 'tenant-b', marker: b },
      ]);
      const t = await keel(['erase', '--tenant', 'tenant-a', '--verify', '--string', a, '--json'], { env });
      expect(t.code).toBe(0);
      const out = JSON.parse(t.out);
      expect(out.erasure).toMatchObject({ scope: 'tenant', sessionIds: [inA] });
      expect(out.verify).toMatchObject({ clean: true, remnants: [] });
      expect((await keel(['erase', '--verify', '--string', b], { env })).code).toBe(1);

      // Everything idle since before now: tenant-b's session (tenant-a's is erased already).
      const d = await keel(['erase', '--before', new Date(Date.now() + 1000).toISOString(), '--json'], { env });
      expect(d.code).toBe(0);
      expect(JSON.parse(d.out).erasure).toMatchObject({ scope: 'before', sessionIds: [inB] });
      expect((await keel(['erase', '--verify', '--string', b, '--id', inB!], { env })).code).toBe(0);
      const vacuumed = await keel(['erase', '--vacuum', '--verify', '--string', b], { env });
      expect(vacuumed.code).toBe(0);
      expect(vacuumed.out).toMatch(/^vacuum: (the database file was rebuilt \(VACUUM\)|every table was vacuumed)/);
      expect(vacuumed.out).toMatch(
        /\nverify: 1 ids and strings searched in every table of the store: nothing found\n$/,
      );
    });
  });
}

describe('keel erase: usage', () => {
  it('refuses no scope, two scopes, a bad date, verify without needles, a too short needle, an unknown session', async () => {
    const { env, open } = await database('sqlite');
    await fill(open, []);
    const cases: Array<[string[], number, RegExp]> = [
      [['erase'], 2, /give --session ID, --tenant T or --before DATE/],
      [['erase', '--session', 'x', '--tenant', 'y'], 2, /give one of --session, --tenant, --before/],
      [['erase', '--before', 'last week'], 2, /--before must be a date/],
      [['erase', '--verify'], 2, /give at least one/],
      [['erase', '--audit', '--session', 'x'], 2, /lists the audit/],
      [['erase', '--verify', '--string', 'ab'], 1, /shorter than 4 characters/],
      [['erase', '--session', 'no-such-session'], 1, /session no-such-session/],
    ];
    for (const [argv, code, message] of cases) {
      const r = await keel(argv, { env });
      expect(r.code, argv.join(' ')).toBe(code);
      expect(r.err, argv.join(' ')).toMatch(message);
    }
  });
});
