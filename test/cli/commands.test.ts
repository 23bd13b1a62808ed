import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoAgent } from '../../src/config/demo.ts';
import { defineAgent } from '../../src/core/index.ts';
import { ScriptedModel } from '../../src/model/index.ts';
import { CLAIM_POLICY, createRuntime, type Runtime } from '../../src/runs/index.ts';
import { openSqliteStore, type SqliteStore } from '../../src/store/sqlite/index.ts';
import { keel, keelLive, until } from './io.ts';

/**
 * The database commands (sessions, runs, events, replay) on a temp database filled through the
 * library: a completed run, an archived session, a run waiting for approval, a queued run and a
 * run held by a worker that is gone.
 */
let dir: string;
let db: string;
let store: SqliteStore;
let rt: Runtime;
const ids = { alpha: '', beta: '', gamma: '', delta: '', ghost: '' };
const runs = { alpha: '', gamma: '', delta: '', ghost: '' };

beforeAll(async () => {
  dir = mkdtempSync(join(tmpdir(), 'keel-cli-'));
  db = join(dir, 'keel.db');
  store = openSqliteStore({ path: db });
  const agent = defineAgent({
    name: 'test-agent',
    model: new ScriptedModel([{ text: 'hello there' }], { loop: true }),
  });
  rt = createRuntime({ store, agents: [agent, demoAgent()] });
  const worker = rt.startWorker({ concurrency: 2 });

  const alpha = await rt.sessions.create({ title: 'alpha' });
  ids.alpha = alpha.id;
  const a = await rt.sessions.send(alpha.id, 'hi');
  runs.alpha = a.run.id;
  expect((await rt.runs.wait(a.run.id, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');

  ids.beta = (await rt.sessions.create({ title: 'beta (old)' })).id;
  await rt.sessions.archive(ids.beta);

  const gamma = await rt.sessions.create({ title: 'gamma', agent: 'demo' });
  ids.gamma = gamma.id;
  const g = await rt.sessions.send(gamma.id, 'weather in paris?', { agent: 'demo' });
  runs.gamma = g.run.id;
  expect((await rt.runs.wait(g.run.id, { timeoutMs: 20_000 })).status).toBe('waiting_approval');
  await worker.stop();

  const delta = await rt.sessions.create({ title: 'delta' });
  ids.delta = delta.id;
  runs.delta = (await rt.sessions.send(delta.id, 'later')).run.id;

  const ghost = await rt.sessions.create({ title: 'ghost' });
  ids.ghost = ghost.id;
  runs.ghost = (await rt.sessions.send(ghost.id, 'held')).run.id;
  // A worker claimed it and then vanished: its lease is still valid for a minute.
  expect(
    (await store.claims.claim('ghost-worker', 60_000, Date.now(), CLAIM_POLICY, { runId: runs.ghost }))?.run.status,
  ).toBe('running');
});

afterAll(async () => {
  await rt?.close();
  await store?.close();
  rmSync(dir, { recursive: true, force: true });
});

describe('keel sessions', () => {
  it('ls lists the newest sessions first, without archived ones unless --all', async () => {
    const r = await keel(['sessions', 'ls', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^ID\s+CREATED\s+EVENTS\s+AGENT\s+TENANT\s+TITLE/);
    const rows = r.out.trim().split('\n').slice(1);
    expect(rows.map((l) => l.split(/\s+/)[0])).toEqual([ids.ghost, ids.delta, ids.gamma, ids.alpha]);
    expect(r.out).not.toContain('beta');
    expect(r.out).toContain('demo');

    const all = await keel(['sessions', 'ls', '--db', db, '--all']);
    expect(all.out).toContain('beta (old) (archived)');

    const one = await keel(['sessions', 'ls', '--db', db, '--limit', '1']);
    expect(one.out).toContain(ids.ghost);
    expect(one.out).not.toContain(ids.alpha);
    expect(one.out).toContain('(the newest 1 of 4; --limit N shows more)');
  });

  it('ls --json gives the API session objects with their tenant; $KEEL_DB picks the database', async () => {
    const r = await keel(['sessions', 'ls', '--json'], { env: { KEEL_DB: db } });
    expect(r.code).toBe(0);
    const list = JSON.parse(r.out) as Array<{
      id: string;
      title: string;
      tenant: string;
      last_seq: number;
      archived_at: string | null;
    }>;
    expect(list.map((s) => s.id)).toEqual([ids.ghost, ids.delta, ids.gamma, ids.alpha]);
    expect(list[3]).toMatchObject({ id: ids.alpha, title: 'alpha', tenant: 'default', archived_at: null });
    expect(list[3]!.last_seq).toBeGreaterThan(5);
  });

  it('show prints the session and its transcript', async () => {
    const r = await keel(['sessions', 'show', ids.gamma, '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`session ${ids.gamma}  "gamma"`);
    expect(r.out).toContain('agent demo');
    expect(r.out).toMatch(new RegExp(`runs 1, last waiting_approval; active: ${runs.gamma} \\(waiting_approval\\)`));
    expect(r.out).toMatch(/user: weather in paris\?/);
    expect(r.out).toMatch(/assistant: Let me check the weather in Paris\.\s+\[tools: get_weather ok\]/);
    expect(r.out).toMatch(/assistant: I will send a short report .*\[tools: send_report pending\]/);

    const j = await keel(['sessions', 'show', ids.alpha, '--db', db, '--json']);
    const body = JSON.parse(j.out) as {
      session: { id: string };
      transcript: Array<{ kind: string; text: string }>;
      runs: Array<{ id: string; status: string }>;
    };
    expect(body.session.id).toBe(ids.alpha);
    expect(body.transcript.map((t) => [t.kind, t.text])).toEqual([
      ['user', 'hi'],
      ['assistant', 'hello there'],
    ]);
    expect(body.runs).toEqual([{ id: runs.alpha, status: 'completed', created_at: expect.any(String) }]);
  });

  it('show of an unknown session fails with exit code 1', async () => {
    const r = await keel(['sessions', 'show', 'nope', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.err).toBe('keel: session nope does not exist\n');
    expect(r.out).toBe('');
  });

  it('export writes JSONL to stdout or a file, and import restores it elsewhere (file or stdin)', async () => {
    const r = await keel(['sessions', 'export', ids.alpha, '--db', db]);
    expect(r.code).toBe(0);
    const lines = r.out.trim().split('\n');
    expect(JSON.parse(lines[0]!)).toMatchObject({
      kind: 'keel.session',
      version: 1,
      session: { id: ids.alpha, title: 'alpha' },
    });
    expect(lines.every((l) => JSON.parse(l) !== null)).toBe(true);

    const file = join(dir, 'alpha.jsonl');
    const f = await keel(['sessions', 'export', ids.alpha, '--db', db, '--out', file]);
    expect(f.code).toBe(0);
    expect(f.out).toMatch(
      new RegExp(
        `^exported session ${ids.alpha} \\(\\d+ events, ${lines.length} lines\\) to ${file.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}\n$`,
      ),
    );
    expect(readFileSync(file, 'utf8')).toBe(r.out);

    const other = join(dir, 'other.db');
    const imp = await keel(['sessions', 'import', file, '--db', other, '--keep-ids']);
    expect(imp.code).toBe(0);
    expect(imp.out).toMatch(
      new RegExp(`^imported session ${ids.alpha} \\(\\d+ events, "alpha"\\) for tenant default\n$`),
    );
    const shown = await keel(['sessions', 'show', ids.alpha, '--db', other]);
    expect(shown.out).toContain('assistant: hello there');

    const third = join(dir, 'third.db');
    const fromStdin = await keel(
      ['sessions', 'import', '-', '--db', third, '--json', '--tenant', 'acme', '--keep-ids'],
      { stdin: r.out },
    );
    expect(fromStdin.code).toBe(0);
    expect(JSON.parse(fromStdin.out)).toMatchObject({ id: ids.alpha, tenant: 'acme', title: 'alpha' });

    // Once is enough with the same ids: the same session again is refused...
    const again = await keel(['sessions', 'import', file, '--db', other, '--keep-ids']);
    expect(again.code).toBe(1);
    expect(again.err).toContain(`session ${ids.alpha} already exists`);
    // ...and by default it is imported under new ids, its origin the session it came from.
    const copy = await keel(['sessions', 'import', file, '--db', other, '--json']);
    expect(copy.code).toBe(0);
    const imported = JSON.parse(copy.out);
    expect(imported.id).not.toBe(ids.alpha);
    expect(imported.origin).toMatchObject({ session_id: ids.alpha });
    expect((await keel(['sessions', 'show', imported.id, '--db', other])).out).toContain('assistant: hello there');

    // Erased: a tombstone; its content is gone, and so is the import of it.
    const erased = await keel(['sessions', 'erase', imported.id, '--db', other]);
    expect(erased.code, erased.err).toBe(0);
    expect(erased.out).toMatch(
      new RegExp(`^erased session ${imported.id} \\(tenant default; \\d+ runs, cost [\\d.]+ kept for billing\\)\n$`),
    );
    expect((await keel(['sessions', 'show', imported.id, '--db', other])).code).toBe(1);
    const all = await keel(['sessions', 'erase', '--tenant', 'acme', '--all', '--db', third, '--json']);
    expect(JSON.parse(all.out)).toEqual({ tenant: 'acme', erased: 1 });
    expect((await keel(['sessions', 'erase', '--db', third])).code).toBe(2);
  });

  it('import refuses a broken export with line numbers, and a missing file, with exit code 1', async () => {
    const bad = join(dir, 'bad.jsonl');
    writeFileSync(bad, '{"kind":"keel.session","version":1}\nnot json\n');
    const r = await keel(['sessions', 'import', bad, '--db', join(dir, 'bad.db')]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(
      /^keel: import refused, nothing was written \(1 problem\):\n {2}line 1: the first line must be a keel\.session header/,
    );

    const missing = await keel(['sessions', 'import', join(dir, 'missing.jsonl'), '--db', join(dir, 'bad.db')]);
    expect(missing.code).toBe(1);
    expect(missing.err).toContain('cannot read');
    expect(missing.err).toContain('no such file');
  });

  it('import shows progress on stderr only when it is a terminal', async () => {
    const { out } = await keel(['sessions', 'export', ids.alpha, '--db', db]);
    const plain = await keel(['sessions', 'import', '-', '--db', join(dir, 'p1.db')], { stdin: out });
    expect(plain.code).toBe(0);
    expect(plain.err).toBe('');
    const tty = await keel(['sessions', 'import', '-', '--db', join(dir, 'p2.db')], { stdin: out, tty: true });
    expect(tty.code).toBe(0);
    expect(tty.err).toContain('importing stdin:');
    expect(tty.err.endsWith('\r\x1b[2K')).toBe(true);
  });

  it('usage errors exit with code 2', async () => {
    for (const argv of [
      ['sessions'],
      ['sessions', 'frob'],
      ['sessions', 'show'],
      ['sessions', 'ls', '--bogus'],
      ['sessions', 'ls', '--limit', 'x'],
      ['sessions', 'export'],
    ]) {
      const r = await keel([...argv, '--db', db]);
      expect(r.code, argv.join(' ')).toBe(2);
      expect(r.err).toMatch(/^keel: /);
    }
  });

  it('refuses a database path where there is none instead of creating one', async () => {
    const path = join(dir, 'nowhere', 'keel.db');
    const r = await keel(['sessions', 'ls', '--db', path]);
    expect(r.code).toBe(1);
    expect(r.err).toContain(`no database at ${path}`);
    expect(existsSync(path)).toBe(false);
  });
});

describe('keel runs', () => {
  it('ls lists runs newest first, filtered by session and status', async () => {
    const r = await keel(['runs', 'ls', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^ID\s+SESSION\s+STATUS\s+AGENT\s+CREATED\s+TOOK\s+COST/);
    const rows = r.out.trim().split('\n').slice(1);
    expect(rows.map((l) => l.split(/\s+/)[0])).toEqual([runs.ghost, runs.delta, runs.gamma, runs.alpha]);
    expect(r.out).toMatch(new RegExp(`${runs.gamma}\\s+${ids.gamma}\\s+waiting_approval\\s+demo@1`));

    const queued = await keel(['runs', 'ls', '--db', db, '--status', 'queued,running', '--json']);
    const list = JSON.parse(queued.out) as Array<{
      id: string;
      status: string;
      session_id: string;
      child_run_ids: string[];
    }>;
    expect(list.map((x) => [x.id, x.status])).toEqual([
      [runs.ghost, 'running'],
      [runs.delta, 'queued'],
    ]);
    expect(list[0]!.child_run_ids).toEqual([]);

    const bySession = await keel(['runs', 'ls', '--db', db, '--session', ids.alpha]);
    expect(bySession.out.trim().split('\n')).toHaveLength(2);
    expect(bySession.out).toContain('completed');
  });

  it('ls refuses an unknown status (usage) and an unknown session', async () => {
    const r = await keel(['runs', 'ls', '--db', db, '--status', 'snoozing']);
    expect(r.code).toBe(2);
    expect(r.err).toContain('unknown status "snoozing"');
    const s = await keel(['runs', 'ls', '--db', db, '--session', 'nope']);
    expect(s.code).toBe(1);
    expect(s.err).toBe('keel: session nope does not exist\n');
  });

  it('show prints what a run waits for; --json the API run object', async () => {
    const r = await keel(['runs', 'show', runs.gamma, '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toContain(`run ${runs.gamma}  waiting_approval`);
    expect(r.out).toContain(`session   ${ids.gamma}`);
    expect(r.out).toContain('agent     demo@1');
    expect(r.out).toMatch(/waiting {3}for approval:\n {4}call_\S+ {2}approve send_report\(\{"to":"team@example.com"/);

    const j = await keel(['runs', 'show', runs.gamma, '--db', db, '--json']);
    expect(JSON.parse(j.out)).toMatchObject({
      id: runs.gamma,
      status: 'waiting_approval',
      waiting: { kind: 'approval', requests: [{ tool: 'send_report', decided: false }] },
    });

    const missing = await keel(['runs', 'show', 'nope', '--db', db]);
    expect(missing.code).toBe(1);
    expect(missing.err).toBe('keel: run nope does not exist\n');
  });

  it('cancel cancels a queued run, is a no-op on a finished one, and forces a run whose worker is gone', async () => {
    const q = await keel(['runs', 'cancel', runs.delta, '--db', db]);
    expect(q.code).toBe(0);
    expect(q.out).toBe(`cancelled run ${runs.delta} (it was queued)\n`);
    expect((await store.runs.get(runs.delta))?.status).toBe('cancelled');

    const again = await keel(['runs', 'cancel', runs.delta, '--db', db]);
    expect(again.code).toBe(0);
    expect(again.out).toBe(`run ${runs.delta} is already cancelled: nothing to cancel\n`);

    // Nobody renews ghost-worker's lease: after the grace period the cancel is forced here.
    const forced = await keel(['runs', 'cancel', runs.ghost, '--db', db, '--grace', '50', '--json']);
    expect(forced.code).toBe(0);
    expect(JSON.parse(forced.out)).toMatchObject({ id: runs.ghost, status: 'cancelled', lease: null });
    const run = await store.runs.get(runs.ghost);
    expect(run?.status).toBe('cancelled');

    const missing = await keel(['runs', 'cancel', 'nope', '--db', db]);
    expect(missing.code).toBe(1);
    expect(missing.err).toBe('keel: run nope does not exist\n');
    expect((await keel(['runs', 'cancel', '--db', db])).code).toBe(2);
    expect((await keel(['runs', 'cancel', runs.gamma, '--db', db, '--grace', '-1'])).code).toBe(2);
  });
});

describe('keel events', () => {
  it('prints the log one event a line, from --after, filtered by --type', async () => {
    const r = await keel(['events', ids.alpha, '--db', db]);
    expect(r.code).toBe(0);
    const lines = r.out.trim().split('\n');
    expect(lines[0]).toMatch(/^#1\s+\d{4}-\d\d-\d\d \d\d:\d\d:\d\d {2}session\/created\s+"alpha"$/);
    expect(lines[1]).toMatch(/^#2\s+.*user\/message\s+run …\S{6} t1\s+hi$/);
    expect(r.out).toMatch(/assistant\/message\s+run …\S{6} t1 s1\s+"hello there" \(stop, \d+ in \/ \d+ out\)/);
    expect(r.out).toMatch(/run\/status\s+run …\S{6} t1\s+running -> completed\n$/);
    expect(r.out).toMatch(/turn\/start\s+run …\S{6} t1\s+test-agent@1 on scripted:scripted-1\n/);

    const after = await keel(['events', ids.alpha, '--db', db, '--after', '2']);
    expect(after.out.trim().split('\n')[0]).toMatch(/^#3 /);

    const typed = await keel(['events', ids.alpha, '--db', db, '--type', 'run/']);
    expect(
      typed.out
        .trim()
        .split('\n')
        .every((l) => / run\/status /.test(l)),
    ).toBe(true);
  });

  it('--json prints one API event envelope a line', async () => {
    const r = await keel(['events', ids.alpha, '--db', db, '--json']);
    const events = r.out
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as { seq: number; type: string; session_id: string; time: string });
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    expect(events[0]).toMatchObject({
      seq: 1,
      type: 'session/created',
      session_id: ids.alpha,
      data: { title: 'alpha' },
    });
    expect(events[0]!.time).toMatch(/Z$/);
  });

  it('--follow keeps printing new events until stopped', async () => {
    const s = await rt.sessions.create({ title: 'followed' });
    const live = keelLive(['events', s.id, '--db', db, '--follow', '--interval', '20']);
    await until(() => live.out().includes('session/created'), 'the first event');
    await rt.sessions.update(s.id, { title: 'renamed' });
    await until(() => live.out().includes('session/updated'), 'the new event');
    expect(await live.stop()).toBe(0);
    expect(live.out().trim().split('\n')).toHaveLength(2);
  });

  it('refuses an unknown session (1) and a missing one (2)', async () => {
    const r = await keel(['events', 'nope', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.err).toBe('keel: session nope does not exist\n');
    expect((await keel(['events', '--db', db])).code).toBe(2);
    expect((await keel(['events', ids.alpha, '--db', db, '--after', 'x'])).code).toBe(2);
  });
});

describe('keel replay', () => {
  it('--verify reports a log that explains its requests (exit 0)', async () => {
    const r = await keel(['replay', ids.gamma, '--verify', '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(/^replay ok: \d+ events, 2 model requests; the log explains every request\n$/);
    const j = await keel(['replay', ids.alpha, '--verify', '--db', db, '--json']);
    expect(JSON.parse(j.out)).toMatchObject({ sessionId: ids.alpha, requests: 1, mismatches: [], ok: true });
  });

  it('--verify reports mismatches with exit code 1', async () => {
    // A session whose request header does not match what its log rebuilds.
    const { out } = await keel(['sessions', 'export', ids.alpha, '--db', db]);
    const tampered = out
      .trim()
      .split('\n')
      .map((l) => {
        const v = JSON.parse(l) as { kind: string; type?: string; data?: { promptHash?: string } };
        if (v.type === 'request/header') v.data!.promptHash = '0'.repeat(64);
        return JSON.stringify(v);
      })
      .join('\n');
    const other = join(dir, 'tampered.db');
    expect((await keel(['sessions', 'import', '-', '--db', other, '--keep-ids'], { stdin: tampered })).code).toBe(0);
    const r = await keel(['replay', ids.alpha, '--verify', '--db', other]);
    expect(r.code).toBe(1);
    expect(r.out).toMatch(
      /^replay FAILED: 1 of 1 request do not match the log \(\d+ events, 1 model request\)\n {2}#\d+ \(message \S+\) fingerprint: the request rebuilt from the log has fingerprint/,
    );
    const j = await keel(['replay', ids.alpha, '--db', other, '--json']);
    expect(j.code).toBe(1);
    expect(JSON.parse(j.out)).toMatchObject({ ok: false, mismatches: [{ kind: 'fingerprint' }] });
  });

  it('shows progress on a terminal stderr; unknown sessions fail', async () => {
    const r = await keel(['replay', ids.alpha, '--db', db], { tty: true });
    expect(r.code).toBe(0);
    expect(r.err).toContain(`replaying ${ids.alpha}:`);
    const missing = await keel(['replay', 'nope', '--verify', '--db', db]);
    expect(missing.code).toBe(1);
    expect(missing.err).toBe('keel: session nope does not exist\n');
  });
});

describe('keel help', () => {
  it('lists the commands, and each has its help', async () => {
    const r = await keel(['--help']);
    for (const c of [
      'keel sessions ls',
      'keel runs ls',
      'keel events <session>',
      'keel replay <session>',
      'keel chat [session]',
    ])
      expect(r.out).toContain(c);
    for (const c of ['sessions', 'runs', 'events', 'replay', 'chat']) {
      const h = await keel([c, '--help']);
      expect(h.code).toBe(0);
      expect(h.out).toMatch(new RegExp(`^keel ${c} `));
    }
  });
});

describe('keel compare', () => {
  it('renders two runs step by step, and --json prints the comparison', async () => {
    const r = await keel(['compare', runs.alpha, runs.gamma, '--db', db]);
    expect(r.code).toBe(0);
    expect(r.out).toMatch(new RegExp(`^A ${runs.alpha}  test-agent@`));
    expect(r.out).toMatch(/status\s+completed\s+waiting_approval\s+≠/);
    expect(r.out).toMatch(/^step 1$/m);
    expect(r.out).toMatch(/text ≠ \[-hello-\]\{\+Let\+\} \[-there-\]\{\+me check the weather/);
    expect(r.out).toMatch(
      /tool call 1 only in B\n {4}A \(none\)\n {4}B get_weather \{"city":"paris"\} → .* \[executed\]/,
    );
    expect(r.out).toMatch(/^step 2 {2}\(only in B\)$/m);
    expect(r.out).toMatch(/final answer ≠/);

    const j = JSON.parse((await keel(['compare', runs.alpha, runs.alpha, '--db', db, '--json'])).out);
    expect(j).toMatchObject({
      a: { id: runs.alpha, status: 'completed', steps: 1 },
      b: { id: runs.alpha },
      status: { a: 'completed', b: 'completed', equal: true },
      finalAnswer: { a: 'hello there', b: 'hello there', equal: true },
      steps: [{ step: 1, presentIn: 'both', text: { equal: true }, toolCalls: [] }],
    });
  });

  it('names a run that does not exist, and wants two ids', async () => {
    const r = await keel(['compare', runs.alpha, 'nope', '--db', db]);
    expect(r.code).toBe(1);
    expect(r.err).toMatch(/run nope does not exist/);
    expect((await keel(['compare', runs.alpha, '--db', db])).code).toBe(2);
  });
});
