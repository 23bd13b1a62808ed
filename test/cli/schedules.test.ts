/**
 * `keel schedules`: create (cron with a time zone, or an interval), ls, pause, resume, fires and
 * delete on a temp database, with plain and --json output, and bad input refused with the reason.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoAgent } from '../../src/config/demo.ts';
import { createRuntime, manualClock, type Runtime } from '../../src/runs/index.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';
import { keel } from './io.ts';

let dir: string;
let db: string;
let store: SqliteStore;
let rt: Runtime;
let sessionId: string;

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-cli-schedules-'));
  db = join(dir, 'keel.db');
  store = openSqliteStore({ path: db });
  rt = createRuntime({ store, agents: [demoAgent()], clock: manualClock(Date.now()) });
  sessionId = (await rt.sessions.create({ title: 'reports' })).id;
});

afterAll(async () => {
  await rt?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('keel schedules', () => {
  it('creates, lists, pauses, resumes, shows fires and deletes', async () => {
    const created = await keel([
      'schedules',
      'create',
      '--db',
      db,
      '--cron',
      '0 9 * * 1',
      '--tz',
      'Europe/Paris',
      '--message',
      'weekly report',
      '--session',
      sessionId,
      '--overlap',
      'enqueue',
      '--name',
      'weekly',
      '--json',
    ]);
    expect(created.err).toBe('');
    expect(created.code).toBe(0);
    const s = JSON.parse(created.out) as {
      id: string;
      cron: unknown;
      overlap: string;
      target: unknown;
      next_fire_at: string;
    };
    expect(s).toMatchObject({
      cron: { expression: '0 9 * * 1', timezone: 'Europe/Paris' },
      overlap: 'enqueue',
      target: { session_id: sessionId },
    });
    // 09:00 in Paris is 07:00 or 08:00 UTC, on a Monday.
    expect(new Date(s.next_fire_at).getUTCDay()).toBe(1);
    expect([7, 8]).toContain(new Date(s.next_fire_at).getUTCHours());

    const plain = await keel([
      'schedules',
      'create',
      '--db',
      db,
      '--every',
      '60',
      '--message',
      'ping',
      '--new-session',
      '--title',
      'pings',
    ]);
    expect(plain.code).toBe(0);
    expect(plain.out).toMatch(/^created schedule \S+: every 60 s, to a new session per fire; next fire /);
    const everyId = plain.out.split(' ')[2]!.replace(':', '');

    const ls = await keel(['schedules', 'ls', '--db', db]);
    expect(ls.code).toBe(0);
    expect(ls.out).toContain(s.id);
    expect(ls.out).toContain('cron "0 9 * * 1" Europe/Paris');
    expect(ls.out).toContain('every 60 s');

    expect((await keel(['schedules', 'pause', '--db', db, everyId])).out).toBe(`paused schedule ${everyId}\n`);
    expect((await keel(['schedules', 'ls', '--db', db])).out).toMatch(new RegExp(`${everyId}.*paused`));
    expect((await keel(['schedules', 'resume', '--db', db, everyId])).out).toMatch(/^resumed schedule .* next fire /);

    expect((await keel(['schedules', 'fires', '--db', db, everyId])).out).toBe(
      `schedule ${everyId} has not fired yet\n`,
    );
    // A fire, as a worker would make it.
    (rt.clock as ReturnType<typeof manualClock>).advance(120_000);
    const [fire] = await rt.schedules.check();
    const fires = await keel(['schedules', 'fires', '--db', db, everyId]);
    expect(fires.out).toMatch(/\bfired\b/);
    expect(fires.out).toContain(fire!.runId!);
    const firesJson = JSON.parse((await keel(['schedules', 'fires', '--db', db, everyId, '--json'])).out) as Array<{
      outcome: string;
      run_id: string;
    }>;
    expect(firesJson).toEqual([expect.objectContaining({ outcome: 'fired', run_id: fire!.runId })]);

    expect((await keel(['schedules', 'delete', '--db', db, everyId])).out).toBe(`deleted schedule ${everyId}\n`);
    const gone = await keel(['schedules', 'delete', '--db', db, everyId]);
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/schedule .* does not exist/);
  });

  it('refuses bad input with the reason', async () => {
    const bad = await keel([
      'schedules',
      'create',
      '--db',
      db,
      '--cron',
      '61 * * * *',
      '--message',
      'x',
      '--session',
      sessionId,
    ]);
    expect(bad.code).toBe(1);
    expect(bad.err).toMatch(/cron.expression: .*Invalid value for minute: 61/);
    const tz = await keel([
      'schedules',
      'create',
      '--db',
      db,
      '--cron',
      '0 9 * * *',
      '--tz',
      'Mars/Base',
      '--message',
      'x',
      '--session',
      sessionId,
    ]);
    expect(tz.err).toMatch(/unknown time zone "Mars\/Base"/);
    const both = await keel(['schedules', 'create', '--db', db, '--message', 'x', '--session', sessionId]);
    expect(both.code).toBe(2);
    expect(both.err).toMatch(/one of --cron EXPR and --every SECONDS/);
    const overlap = await keel([
      'schedules',
      'create',
      '--db',
      db,
      '--every',
      '5',
      '--message',
      'x',
      '--session',
      sessionId,
      '--overlap',
      'never',
    ]);
    expect(overlap.code).toBe(2);
    const noSession = await keel([
      'schedules',
      'create',
      '--db',
      db,
      '--every',
      '5',
      '--message',
      'x',
      '--session',
      'nope',
    ]);
    expect(noSession.err).toMatch(/target.session_id: session nope does not exist/);
    expect((await keel(['schedules', 'frobnicate', '--db', db])).code).toBe(2);
  });
});
