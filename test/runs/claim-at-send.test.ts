/**
 * A message claims its run for a worker of the same process in its own transaction (ADR-0027):
 * the run starts without a commit, a wake-up and a look for work of its own. Only a worker with a
 * free slot takes it, the oldest claimable run still goes first, a message that creates no run
 * takes no slot, and a worker that stops meanwhile still starts (then hands back) what was
 * claimed for it. A process killed right after such a send leaves a claimed run with a lease,
 * recovered like any other.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  openSqliteStore,
  RunBusyError,
  ScriptedModel,
  SqliteStore,
  tool,
  type AgentDefinition,
  type RunRecord,
  type Runtime,
  type ScriptEntry,
} from '../../src/index.ts';
import { allEvents } from '../support/session-helpers.ts';
import { gated } from '../support/runs-helpers.ts';
import { flush } from '../support/deferred.ts';
import type { ClaimAtSendMessage } from './fixtures/claim-at-send-worker.ts';

const cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

function setup(
  agents: AgentDefinition[],
  store: SqliteStore = openSqliteStore({ path: ':memory:' }),
): { rt: Runtime; store: SqliteStore } {
  const rt = createRuntime({ store, agents });
  cleanups.push(async () => {
    await rt.close({ graceMs: 50 });
    await store.close().catch(() => {});
  });
  return { rt, store };
}

function agent(script: ScriptEntry[], tools: AgentDefinition['tools'] = []): AgentDefinition {
  return defineAgent({ name: 'a', model: new ScriptedModel(script, { loop: true }), tools });
}

/** The run's status moves in log order, with the seq of each. */
async function moves(rt: Runtime, run: RunRecord): Promise<Array<{ seq: number; to: string; reason?: string }>> {
  return (await allEvents(rt.sessions, run.sessionId))
    .filter((e) => e.type === 'run/status' && e.runId === run.id)
    .map((e) => ({ seq: e.seq, to: (e.data as { to: string }).to, reason: (e.data as { reason?: string }).reason }));
}

describe('a message claims its run for a worker of this process', () => {
  it("in the message's transaction: one commit, the run returned running, its moves logged with the message", async () => {
    const { rt, store } = setup([agent([{ text: 'done' }])]);
    const worker = rt.startWorker({ id: 'w1', pollMs: 60_000 });
    const s = await rt.sessions.create();
    const commits = store.commitCount;
    const { run, message } = await rt.sessions.send(s.id, 'hi');
    expect(store.commitCount - commits).toBe(1);
    expect(run.status).toBe('running');
    expect(run.lease?.owner).toBe('w1');
    expect(run.attempt).toBe(1);
    const events = await allEvents(rt.sessions, s.id);
    const user = events.find((e) => e.type === 'user/message')!;
    expect((user.data as { message: { id: string } }).message.id).toBe(message.id);
    const [queued, running] = await moves(rt, run);
    expect(queued).toMatchObject({ to: 'queued', seq: user.seq + 1 });
    expect(running).toMatchObject({ to: 'running', seq: user.seq + 2, reason: 'claimed by w1' });
    expect((await rt.runs.wait(run.id, { timeoutMs: 5000 })).status).toBe('completed');
    await flush();
    expect(worker.active).toBe(0);
  });

  it('not when the worker is full: the run stays queued until a slot frees', async () => {
    const slow = gated('slow');
    const { rt } = setup([
      agent(
        [
          (call) =>
            call.prompt.some((m) => m.role === 'tool')
              ? { text: 'done' }
              : { toolCalls: [{ name: 'slow', input: {} }] },
        ],
        [slow.tool],
      ),
    ]);
    const worker = rt.startWorker({ concurrency: 1, pollMs: 60_000 });
    const first = await rt.sessions.send((await rt.sessions.create()).id, 'one');
    expect(first.run.status).toBe('running');
    await slow.started.promise;
    const second = await rt.sessions.send((await rt.sessions.create()).id, 'two');
    expect(second.run.status).toBe('queued');
    expect(worker.active).toBe(1);
    slow.gate.resolve('ok');
    expect((await rt.runs.wait(first.run.id, { timeoutMs: 5000 })).status).toBe('completed');
    // The freed slot takes the queued run (the worker looks again once a run ends).
    expect((await rt.runs.wait(second.run.id, { timeoutMs: 5000 })).status).toBe('completed');
  });

  it('a message that creates no run, or is refused, takes no slot', async () => {
    const slow = gated('slow');
    const { rt } = setup([
      agent(
        [
          (call) =>
            call.prompt.some((m) => m.role === 'tool')
              ? { text: 'done' }
              : { toolCalls: [{ name: 'slow', input: {} }] },
        ],
        [slow.tool],
      ),
    ]);
    const worker = rt.startWorker({ concurrency: 2, pollMs: 60_000 });
    const s = await rt.sessions.create();
    const active = await rt.sessions.send(s.id, 'one');
    await slow.started.promise;
    expect(worker.active).toBe(1);
    await expect(rt.sessions.send(s.id, 'refused')).rejects.toBeInstanceOf(RunBusyError);
    const steered = await rt.sessions.send(s.id, 'steer', { ifBusy: 'steer' });
    expect(steered.outcome).toBe('steered');
    const enqueued = await rt.sessions.send(s.id, 'later', { ifBusy: 'enqueue' });
    expect(enqueued.outcome).toBe('enqueued');
    expect(enqueued.run.status).toBe('queued');
    // The slots they were offered are back (the worker looks for work once each is: nothing to take).
    await flush();
    expect(worker.active).toBe(1);
    // The free slot is still there for a message of another session.
    const other = await rt.sessions.send((await rt.sessions.create()).id, 'other');
    expect(other.run.status).toBe('running');
    slow.gate.resolve('ok');
    for (const id of [active.run.id, enqueued.run.id, other.run.id])
      expect((await rt.runs.wait(id, { timeoutMs: 5000 })).status).toBe('completed');
  });

  it('a message that is not a valid user message is refused: no run, no event, no slot taken', async () => {
    const { rt, store } = setup([agent([{ text: 'done' }])]);
    const worker = rt.startWorker({ concurrency: 1, pollMs: 60_000 });
    const s = await rt.sessions.create();
    const before = await allEvents(rt.sessions, s.id);
    const bad = { id: 'm-bad', role: 'user', content: [{ type: 'image', url: 'x' }] } as unknown as Parameters<
      Runtime['sessions']['send']
    >[1];
    await expect(rt.sessions.send(s.id, bad)).rejects.toMatchObject({
      name: 'InvalidEventError',
      code: 'invalid_event',
    });
    await expect(
      rt.sessions.send(s.id, [{ type: 'text', text: 1 }] as unknown as Parameters<Runtime['sessions']['send']>[1]),
    ).rejects.toMatchObject({ code: 'invalid_event' });
    expect(await allEvents(rt.sessions, s.id)).toEqual(before);
    expect(await store.runs.list({ sessionId: s.id, limit: 10 })).toEqual([]);
    await flush();
    expect(worker.active).toBe(0);
    // The session and the worker take the next valid message.
    const ok = await rt.sessions.send(s.id, 'fine');
    expect(ok.run.status).toBe('running');
    expect((await rt.runs.wait(ok.run.id, { timeoutMs: 5000 })).status).toBe('completed');
  });

  it('the oldest claimable run goes first: a message claims what the worker would have', async () => {
    const store = openSqliteStore({ path: ':memory:' });
    const slow = gated('slow');
    const a = agent(
      [
        (call) =>
          call.prompt.some((m) => m.role === 'tool') ? { text: 'done' } : { toolCalls: [{ name: 'slow', input: {} }] },
      ],
      [slow.tool],
    );
    const { rt } = setup([a], store);
    rt.startWorker({ id: 'w2', concurrency: 1, pollMs: 60_000 });
    // The worker looked for work and found none: it naps for a minute.
    await flush();
    // Another runtime without workers (an API node, say) queues a run: nothing wakes this worker.
    const api = setup([a], store).rt;
    const older = await api.sessions.send((await api.sessions.create()).id, 'older');
    expect(older.run.status).toBe('queued');
    const newer = await rt.sessions.send((await rt.sessions.create()).id, 'newer');
    expect(newer.run.status).toBe('queued');
    expect((await rt.runs.get(older.run.id)).status).toBe('running');
    expect((await rt.runs.get(older.run.id)).lease?.owner).toBe('w2');
    slow.gate.resolve('ok');
    expect((await rt.runs.wait(older.run.id, { timeoutMs: 5000 })).status).toBe('completed');
    expect((await rt.runs.wait(newer.run.id, { timeoutMs: 5000 })).status).toBe('completed');
    const [, running] = await moves(rt, newer.run);
    expect(running).toMatchObject({ to: 'running', reason: 'claimed by w2' });
  });

  it("the worker's own look for work and a message never take one slot twice", async () => {
    const store = openSqliteStore({ path: ':memory:' });
    const slow = gated('slow');
    const a = agent(
      [
        (call) =>
          call.prompt.some((m) => m.role === 'tool') ? { text: 'done' } : { toolCalls: [{ name: 'slow', input: {} }] },
      ],
      [slow.tool],
    );
    const api = setup([a], store).rt;
    const older = await api.sessions.send((await api.sessions.create()).id, 'older');
    const { rt } = setup([a], store);
    // The worker starts looking for work (the older run) while a message comes: one slot, one run.
    const worker = rt.startWorker({ concurrency: 1, pollMs: 60_000 });
    const newer = await rt.sessions.send((await rt.sessions.create()).id, 'newer');
    await slow.started.promise;
    await flush();
    const running = (await rt.runs.list({ statuses: ['running'] })).map((r) => r.id);
    expect(running).toEqual([older.run.id]);
    expect(worker.active).toBe(1);
    expect((await rt.runs.get(newer.run.id)).status).toBe('queued');
    slow.gate.resolve('ok');
    expect((await rt.runs.wait(newer.run.id, { timeoutMs: 5000 })).status).toBe('completed');
  });

  it('a worker stopped while the message commits starts the run it was offered, then hands it back at a step boundary', async () => {
    const slow = gated('slow');
    const { rt } = setup([
      agent(
        [
          (call) =>
            call.prompt.some((m) => m.role === 'tool')
              ? { text: 'done' }
              : { toolCalls: [{ name: 'slow', input: {} }] },
        ],
        [slow.tool],
      ),
    ]);
    const worker = rt.startWorker({ pollMs: 60_000 });
    const s = await rt.sessions.create();
    slow.gate.resolve('ok');
    const sending = rt.sessions.send(s.id, 'hi');
    // The slot is offered before the transaction runs; the stop comes while it is open.
    const stopped = worker.stop({ graceMs: 5000 });
    const { run } = await sending;
    expect(run.status).toBe('running');
    await stopped;
    // Started, then handed back at its next step boundary: queued, no lease.
    const after = await rt.runs.get(run.id);
    expect(after.status).toBe('queued');
    expect(after.lease).toBeNull();
    expect((await moves(rt, run)).map((m) => m.to)).toEqual(['queued', 'running', 'queued']);
    expect(worker.active).toBe(0);
  });
});

describe('a process killed right after its message claimed the run', () => {
  it('leaves the run running under its lease; another worker recovers it once the lease expires', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'keel-claim-at-send-'));
    cleanups.push(async () => rmSync(dir, { recursive: true, force: true }));
    const path = join(dir, 'keel.db');
    const child = spawn(
      process.execPath,
      [fileURLToPath(new URL('./fixtures/claim-at-send-worker.ts', import.meta.url)), path],
      { stdio: ['ignore', 'ignore', 'pipe', 'ipc'] },
    );
    let stderr = '';
    child.stderr!.setEncoding('utf8').on('data', (c: string) => (stderr += c));
    const exited = new Promise<NodeJS.Signals | null>((resolve) =>
      child.once('exit', (_code, signal) => resolve(signal)),
    );
    let sent: Extract<ClaimAtSendMessage, { type: 'sent' }> | undefined;
    let toolStarted = false;
    // Killed once its send returned and its run's tool started (in either order).
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the child never started its tool: ${stderr}`)), 20_000);
      child.on('message', (m: ClaimAtSendMessage) => {
        if (m.type === 'sent') sent = m;
        if (m.type === 'tool-start') toolStarted = true;
        if (sent && toolStarted) {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    child.kill('SIGKILL');
    expect(await exited).toBe('SIGKILL');
    expect(sent?.status).toBe('running');

    const store = new SqliteStore({ path });
    const quick = tool({
      name: 'hang',
      description: 'Returns at once here',
      input: z.object({}),
      idempotent: true,
      execute: () => 'back',
    });
    const { rt } = setup(
      [
        agent(
          [
            (call) =>
              call.prompt.some((m) => m.role === 'tool')
                ? { text: 'done' }
                : { toolCalls: [{ name: 'hang', input: {} }] },
          ],
          [quick],
        ),
      ],
      store,
    );
    const orphan = await rt.runs.get(sent!.runId);
    expect(orphan.status).toBe('running');
    expect(orphan.lease?.owner).toBe('doomed');
    rt.startWorker({ id: 'rescuer', pollMs: 50 });
    const done = await rt.runs.wait(orphan.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    const events = await allEvents(rt.sessions, orphan.sessionId);
    expect(events.filter((e) => e.type === 'run/interrupted')).toHaveLength(1);
    // The call that started before the kill got its one result, from the rescuer.
    const results = events.filter((e) => e.type === 'tool/result');
    expect(results).toHaveLength(1);
    expect(JSON.stringify(results[0]!.data)).toContain('back');
  }, 30_000);
});
