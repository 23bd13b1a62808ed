/**
 * The cluster test: API processes and worker processes (test/cluster/cluster-node.ts) on one
 * PostgreSQL schema, as on separate machines. It starts many runs of the chaos agent through random
 * API processes, with approvals and steering sent to random API processes too, and follows every
 * run with an SSE client that hops from one API process to another mid-stream (resuming with
 * Last-Event-ID); some clients follow the run's session instead, into which a second message is
 * sent while the first answer streams (queued behind the run); one worker is killed with SIGKILL
 * midway. Then it checks:
 *
 * - every client received the run's (or session's) log exactly once, in order, ids only growing (a delta never
 *   ahead of the event it follows), each message's deltas numbered without gap or repeat and
 *   spelling its text, across processes;
 * - every run completed and answered its task, having seen every message steered into it (and
 *   each second message's run answered its own);
 * - no tool that is not idempotent ran twice for one call (the tools' ledger).
 *
 * `runCluster` is shared by the test (test/cluster/cluster.test.ts) and bench/cluster.ts.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { checkAgainstLog, logOf, ResumingClient, sleep } from '../support/sse-helpers.ts';
import type { ChaosLedgerLine } from '../chaos/chaos-agent.ts';

const NODE = fileURLToPath(new URL('./cluster-node.ts', import.meta.url));

export interface ClusterOptions {
  url: string;
  schema: string;
  apis: number;
  workers: number;
  runs: number;
  /** Runs in flight at once (each with its SSE client). */
  parallel?: number;
  /** SIGKILL one worker once this share of the runs started (none when undefined). */
  killAt?: number;
  /** Every run's SSE client hops to another API process after a few items (default true). */
  hop?: boolean;
  /** More options of every node's PostgresStore (as behind a pooler: `pooler`, `listenUrl`). */
  store?: Record<string, unknown>;
  log?: (line: string) => void;
}

export interface ClusterReport {
  runs: number;
  completed: number;
  events: number;
  deltas: number;
  hops: number;
  steered: number;
  approvals: number;
  /** Second messages sent to a session while its first answer streamed, and queued behind its run. */
  enqueued: number;
  killed: number;
  /** Milliseconds from a run's creation to its end event at its client. */
  runMs: number[];
  /** Milliseconds from SIGKILL until every run the killed worker held was running again elsewhere (or done). */
  recoveryMs: number | undefined;
  seconds: number;
  violations: string[];
}

interface Node {
  child: ChildProcess;
  url?: string;
  exited: Promise<void>;
  stderr(): string;
}

function startNode(role: 'api' | 'worker', o: ClusterOptions, ledger: string, n: number): Promise<Node> {
  const child = spawn(
    process.execPath,
    [NODE, role, o.url, o.schema, ledger, String(n), JSON.stringify(o.store ?? {})],
    {
      stdio: ['ignore', 'ignore', 'pipe', 'ipc'],
    },
  );
  let stderr = '';
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return new Promise((resolve, reject) => {
    child.once('message', (m: { url?: string } | string) =>
      resolve({ child, ...(typeof m === 'object' && m.url ? { url: m.url } : {}), exited, stderr: () => stderr }),
    );
    void exited.then(() => reject(new Error(`cluster ${role} ${n} exited before it was ready: ${stderr}`)));
  });
}

async function call<T>(base: string, path: string, body?: unknown): Promise<{ status: number; json: T }> {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    ...(body !== undefined ? { body: JSON.stringify(body), headers: { 'content-type': 'application/json' } } : {}),
  });
  const text = await res.text();
  return { status: res.status, json: (text ? JSON.parse(text) : undefined) as T };
}

const pick = <T>(xs: readonly T[]): T => xs[Math.floor(Math.random() * xs.length)]!;

export async function runCluster(o: ClusterOptions): Promise<ClusterReport> {
  const started = Date.now();
  const dir = mkdtempSync(join(tmpdir(), 'keel-cluster-'));
  const ledger = join(dir, 'ledger.jsonl');
  const violations: string[] = [];
  const log = o.log ?? (() => {});
  const apis = await Promise.all(Array.from({ length: o.apis }, (_, i) => startNode('api', o, ledger, 100 + i)));
  const workers = await Promise.all(Array.from({ length: o.workers }, (_, i) => startNode('worker', o, ledger, i)));
  const urls = apis.map((a) => a.url!);
  log(`cluster: ${o.apis} API processes, ${o.workers} workers, ${o.runs} runs`);
  const report: ClusterReport = {
    runs: o.runs,
    completed: 0,
    events: 0,
    deltas: 0,
    hops: 0,
    steered: 0,
    approvals: 0,
    enqueued: 0,
    killed: 0,
    runMs: [],
    recoveryMs: undefined,
    seconds: 0,
    violations,
  };
  let startedRuns = 0;
  let killedAt: number | undefined;
  const runIds: string[] = [];

  const one = async (i: number): Promise<void> => {
    const name = `t${i}`;
    const danger = i % 4 === 0;
    const steer = i % 3 === 1;
    // Follows the session's stream, and sends a second message while the first answer streams
    // (enqueued behind the run: its status is committed by an API process mid-message).
    const busy = i % 5 === 2 && !danger && !steer;
    const created = Date.now();
    const session = await call<{ id: string }>(pick(urls), '/v1/sessions', {});
    if (session.status !== 201) throw new Error(`create session: ${session.status} ${JSON.stringify(session.json)}`);
    const sent = await call<{ run: { id: string } }>(pick(urls), `/v1/sessions/${session.json.id}/messages`, {
      content: `task ${name} steps=2${danger ? ' danger' : ''}`,
    });
    if (sent.status !== 202 && sent.status !== 201)
      throw new Error(`send: ${sent.status} ${JSON.stringify(sent.json)}`);
    const runId = sent.json.run.id;
    runIds.push(runId);
    startedRuns++;
    const path = busy ? `/v1/sessions/${session.json.id}/stream` : `/v1/runs/${runId}/stream`;
    const client = new ResumingClient(`${pick(urls)}${path}`).open();
    const steered: string[] = [];
    let queuedRunId: string | undefined;
    // A session stream does not end: it is followed until both runs ended.
    const terminal = (id: string | undefined) =>
      id !== undefined &&
      client.items.some(
        (x) =>
          x.kind === 'event' &&
          x.event.run_id === id &&
          x.event.type === 'run/status' &&
          ['completed', 'failed', 'cancelled', 'timed_out'].includes((x.event.data as { to?: string }).to ?? ''),
      );
    const over = () =>
      client.ended || (busy && terminal(runId) && (queuedRunId === undefined || terminal(queuedRunId)));
    const side = (async () => {
      if (busy) {
        await client.waitFor(() => over() || client.items.some((x) => x.kind === 'delta'));
        const r = await call<{ outcome: string; run: { id: string } }>(
          pick(urls),
          `/v1/sessions/${session.json.id}/messages`,
          { content: `task ${name}-b steps=1`, if_busy: 'enqueue' },
        );
        if (r.status !== 202 && r.status !== 201)
          violations.push(`${name}: the second message was refused: ${r.status} ${JSON.stringify(r.json)}`);
        else {
          queuedRunId = r.json.run.id;
          if (r.json.outcome === 'enqueued') report.enqueued++;
        }
      }
      if (steer) {
        await client.waitFor(
          () => client.ended || client.events.some((e) => e.type === 'tool/call' || e.type === 'tool/result'),
        );
        const text = `steer ${name}`;
        const r = await call(pick(urls), `/v1/runs/${runId}/steer`, { content: text });
        if (r.status === 202 || r.status === 200) {
          steered.push(text);
          report.steered++;
        }
      }
      if (danger) {
        await client.waitFor(
          () =>
            client.ended ||
            client.events.some((e) => e.type === 'run/status' && (e.data as { to?: string }).to === 'waiting_approval'),
        );
        if (!client.ended) {
          const r = await call(pick(urls), `/v1/runs/${runId}/approvals/${name}-s1-danger`, { decision: 'approve' });
          if (r.status >= 300) violations.push(`${name}: approval refused: ${r.status} ${JSON.stringify(r.json)}`);
          else report.approvals++;
        }
      }
    })();
    // Hop to another API process every few items until the run ends.
    const deadline = Date.now() + 120_000;
    while (!over() && Date.now() < deadline) {
      const k = 2 + Math.floor(Math.random() * 6);
      const before = client.items.length;
      await Promise.race([client.waitFor(() => over() || client.items.length >= before + k), sleep(2000)]);
      if (!over() && o.hop !== false && client.items.length >= before + k) {
        client.streamUrl = `${pick(urls.filter((u) => !client.streamUrl.startsWith(u)).concat(urls.length === 1 ? urls : []))}${path}`;
        client.open();
        report.hops++;
      }
    }
    await side;
    if (busy) await Promise.race([client.waitFor(over), sleep(Math.max(0, deadline - Date.now()))]);
    client.close();
    if (!over()) {
      violations.push(
        `${name}: the stream of ${busy ? `session ${session.json.id}` : `run ${runId}`} did not end within 120 s`,
      );
      return;
    }
    report.runMs.push(Date.now() - created);
    const events = await logOf(pick(urls), session.json.id, busy ? undefined : runId);
    try {
      const checked = checkAgainstLog(client.items, events);
      report.events += events.length;
      report.deltas += checked.deltas;
    } catch (e) {
      const traceOf = () =>
        `\n  received: ${client.items.map((i) => (i.kind === 'end' ? 'end' : `${i.id}${i.kind === 'event' ? `:${i.event.type}` : `:${JSON.stringify(i.delta.delta)}`}@${i.conn}`)).join(' ')}\n  log: ${events.map((e) => `${e.seq}:${e.type}`).join(' ')}\n  connections: ${client.connectionUrls
          .map((u, i) => `${i}: ${u}`)
          .filter(Boolean)
          .join(', ')}`;
      violations.push(`${name} (run ${runId}): ${(e as Error).message}${traceOf()}`);
    }
    const run = await call<{ status: string }>(pick(urls), `/v1/runs/${runId}`);
    if (run.json.status !== 'completed') violations.push(`${name}: run ${runId} ended ${run.json.status}`);
    else report.completed++;
    if (queuedRunId !== undefined) {
      const second = await call<{ status: string }>(pick(urls), `/v1/runs/${queuedRunId}`);
      if (second.json.status !== 'completed')
        violations.push(`${name}: its second run ${queuedRunId} ended ${second.json.status}`);
      const answer = events.filter((e) => e.type === 'assistant/message' && e.run_id === queuedRunId).at(-1);
      if (!(answer ? JSON.stringify(answer.data) : '').includes(`done ${name}-b;`))
        violations.push(`${name}: the second run did not answer its task`);
    }
    const answer = events.filter((e) => e.type === 'assistant/message' && e.run_id === runId).at(-1);
    const text = answer ? JSON.stringify(answer.data) : '';
    if (!text.includes(`done ${name};`))
      violations.push(`${name}: the last answer is not the task's: ${text.slice(0, 200)}`);
    for (const s of steered)
      if (!text.includes(s)) violations.push(`${name}: "${s}" was accepted but the run never saw it`);
  };

  // Kill one worker once a share of the runs started; measure until its runs run elsewhere.
  const killer = (async () => {
    if (o.killAt === undefined || workers.length < 2) return;
    while (startedRuns < o.runs * o.killAt) await sleep(20);
    await sleep(300);
    workers[0]!.child.kill('SIGKILL');
    killedAt = Date.now();
    report.killed = 1;
    log(`cluster: killed worker 0 after ${startedRuns} runs started`);
    // Recovered once no run is held by the dead worker any more.
    for (;;) {
      await sleep(50);
      const held = await Promise.all(
        runIds.map((id) =>
          call<{ status: string; lease: { owner: string } | null }>(urls[0]!, `/v1/runs/${id}`).then((r) => r.json),
        ),
      );
      if (!held.some((r) => r.status === 'running' && r.lease?.owner.startsWith('cluster-worker-0'))) break;
      if (Date.now() - killedAt > 60_000) break;
    }
    report.recoveryMs = Date.now() - killedAt;
  })();

  try {
    let next = 0;
    const parallel = o.parallel ?? 40;
    await Promise.all(
      Array.from({ length: Math.min(parallel, o.runs) }, async () => {
        while (next < o.runs) {
          const i = next++;
          await one(i).catch((e: unknown) => violations.push(`t${i}: ${(e as Error).message}`));
        }
      }),
    );
    await killer;

    // The outside world's record: no tool that is not idempotent ran twice for one call.
    const lines = readFileSync(ledger, 'utf8')
      .split('\n')
      .filter(Boolean)
      .map((l) => JSON.parse(l) as ChaosLedgerLine);
    const once = new Map<string, number>();
    for (const l of lines)
      if (l.tool !== 'record')
        once.set(`${l.runId}/${l.toolCallId}`, (once.get(`${l.runId}/${l.toolCallId}`) ?? 0) + 1);
    for (const [call, n] of once) if (n > 1) violations.push(`${call} ran ${n} times`);
  } finally {
    for (const n of [...apis, ...workers]) {
      if (n.child.exitCode === null && n.child.signalCode === null) n.child.send?.('stop');
    }
    await Promise.race([Promise.all([...apis, ...workers].map((n) => n.exited)), sleep(10_000)]);
    for (const n of [...apis, ...workers]) n.child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  }
  report.seconds = (Date.now() - started) / 1000;
  return report;
}
