/**
 * Fencing: a worker that froze (GC pause, SIGSTOP, a slow disk) while another took its run over
 * must not be able to write anything for that run when it wakes up, whatever it believes.
 *
 * Two runtimes share one SQLite FILE through two connections, as two processes would. Worker A
 * (short lease) runs a step whose two tools block on deferreds. A is then frozen: its lease
 * renewals stop reaching the store (the test seam is A's own `SqliteStore.renewLease`, replaced
 * on that instance only). The lease expires, worker B claims the run (the fencing token moves
 * on, `run/interrupted` is recorded) and recovers it from the checkpoint. Then A's tools finish:
 * everything A tries to append is refused with FencedError.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  FencedError,
  ScriptedModel,
  SqliteStore,
  tool,
  type Runtime,
  type ScriptEntry,
  type StoredEvent,
  type StoreOps,
} from '../../src/index.ts';
import { deferred, flush, type Deferred } from '../support/deferred.ts';

const LEASE_A_MS = 300;
// B holds the run with a long lease: only A's lease may expire in this test.
const LEASE_B_MS = 60_000;

/** Polls until `check` holds (a wait, never a timing assertion). */
async function until<T>(what: string, check: () => Promise<T | undefined | false>, timeoutMs = 20_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await check();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 10));
  }
}

/** Records every event a store instance committed, and every write it had refused. */
function track(store: SqliteStore): { written: StoredEvent[]; refused: unknown[] } {
  const written: StoredEvent[] = [];
  const refused: unknown[] = [];
  const append = store.events.append.bind(store);
  store.events.append = async (...args: Parameters<SqliteStore['events']['append']>) => {
    try {
      const out = await append(...args);
      written.push(...out);
      return out;
    } catch (e) {
      refused.push(e);
      throw e;
    }
  };
  const transaction = store.transaction.bind(store);
  store.transaction = async <T>(fn: (tx: StoreOps) => Promise<T>): Promise<T> => {
    const pending: StoredEvent[] = [];
    try {
      const result = await transaction((tx) =>
        fn({
          ...tx,
          events: {
            ...tx.events,
            append: async (...args: Parameters<StoreOps['events']['append']>) => {
              const out = await tx.events.append(...args);
              pending.push(...out);
              return out;
            },
          },
        }),
      );
      written.push(...pending); // committed
      return result;
    } catch (e) {
      refused.push(e);
      throw e;
    }
  };
  return { written, refused };
}

interface Side {
  rt: Runtime;
  store: SqliteStore;
  /** Executions of the tools on this side, in order. */
  executions: Array<{ tool: string; toolCallId: string; key: string; signal: AbortSignal }>;
  started: Deferred<void>;
  gate: Deferred<void>;
}

function side(path: string, name: 'A' | 'B', script: ScriptEntry[], leaseMs: number, renewEveryMs: number): Side {
  const store = new SqliteStore({ path });
  const executions: Side['executions'] = [];
  const started = deferred();
  const gate = deferred();
  const body =
    (toolName: string) =>
    async (_input: unknown, ctx: { toolCallId: string; idempotencyKey: string; signal: AbortSignal }) => {
      executions.push({ tool: toolName, toolCallId: ctx.toolCallId, key: ctx.idempotencyKey, signal: ctx.signal });
      if (executions.length >= (name === 'A' ? 2 : 1)) started.resolve();
      await gate.promise;
      return `${toolName} by ${name}`;
    };
  const agent = defineAgent({
    name: 'fenced',
    version: '1',
    model: new ScriptedModel(script),
    tools: [
      tool({
        name: 'fetch',
        description: 'reads (safe to repeat)',
        input: z.object({}),
        idempotent: true,
        execute: body('fetch'),
      }),
      tool({
        name: 'charge',
        description: 'charges a card (not safe to repeat)',
        input: z.object({}),
        execute: body('charge'),
      }),
    ],
  });
  const rt = createRuntime({ store, agents: [agent], leaseMs, renewEveryMs, maxAttempts: 10 });
  return { rt, store, executions, started, gate };
}

describe('fencing: a frozen worker wakes up after another took its run over', () => {
  let dir: string;
  let sides: Side[] = [];

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'keel-fencing-'));
  });

  afterEach(async () => {
    for (const s of sides) {
      s.gate.resolve();
      await s.rt.close({ graceMs: 100 });
      await s.store.close();
    }
    sides = [];
    rmSync(dir, { recursive: true, force: true });
  });

  /**
   * A claims the run and blocks in both tools of step 1; A is frozen (`freeze`); B claims the run
   * once A's lease expired and blocks in its re-execution of the idempotent call.
   */
  async function takeover(freeze: (store: SqliteStore) => { unfreeze(): void }) {
    const path = join(dir, 'keel.db');
    const a = side(
      path,
      'A',
      [
        {
          toolCalls: [
            { id: 'call-fetch', name: 'fetch', input: {} },
            { id: 'call-charge', name: 'charge', input: {} },
          ],
        },
      ],
      LEASE_A_MS,
      50,
    );
    const b = side(path, 'B', [{ text: 'all done' }], LEASE_B_MS, 50);
    sides = [a, b];
    const byA = track(a.store);

    const session = await a.rt.sessions.create();
    const { run } = await a.rt.sessions.send(session.id, 'charge the card and fetch the receipt');
    const workerA = a.rt.startWorker({ id: 'A', concurrency: 1, pollMs: 20 });
    await a.started.promise;
    const executionA = a.rt.executions.get(run.id)!;
    const claimedByA = await a.store.runs.get(run.id);
    expect(claimedByA).toMatchObject({ status: 'running', lease: { owner: 'A' }, fencingToken: 1, attempt: 1 });

    const frozen = freeze(a.store);
    b.rt.startWorker({ id: 'B', concurrency: 4, pollMs: 20 });
    const claimedByB = await until('B to claim the run', async () => {
      const r = await b.store.runs.get(run.id);
      return r?.lease?.owner === 'B' && r;
    });
    expect(claimedByB.fencingToken).toBe(2);
    expect(claimedByB.attempt).toBe(2);
    await b.started.promise; // B re-executes the idempotent call, and blocks in it
    const events = await b.store.events.read(session.id);
    const interrupted = events.find((e) => e.type === 'run/interrupted')!;
    expect(interrupted).toMatchObject({ runId: run.id, data: { attempt: 2, step: 0, reason: 'lease_expired' } });

    return { a, b, byA, workerA, executionA, frozen, run, session, interrupted };
  }

  async function finalChecks(t: Awaited<ReturnType<typeof takeover>>) {
    const { a, b, byA, run, session, interrupted } = t;
    // A wrote nothing after B's claim: its last committed event precedes B's run/interrupted.
    expect(byA.written.length).toBeGreaterThan(0);
    expect(Math.max(...byA.written.map((e) => e.seq))).toBeLessThan(interrupted.seq);

    b.gate.resolve();
    const done = await b.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');

    const events = await b.store.events.read(session.id);
    expect(events.map((e) => e.seq)).toEqual(events.map((_, i) => i + 1));
    const results = events.filter((e) => e.type === 'tool/result') as Array<
      StoredEvent & { data: { toolCallId: string; output: { type: string; value?: string; code?: string } } }
    >;
    // Exactly one result per call, and it is B's.
    expect(results.map((r) => r.data.toolCallId).sort()).toEqual(['call-charge', 'call-fetch']);
    expect(results.find((r) => r.data.toolCallId === 'call-fetch')!.data.output).toEqual({
      type: 'text',
      value: 'fetch by B',
    });
    expect(results.find((r) => r.data.toolCallId === 'call-charge')!.data.output).toMatchObject({
      type: 'error',
      code: 'outcome_unknown',
    });
    for (const r of results) expect(r.seq).toBeGreaterThan(interrupted.seq);
    // Each call was recorded once; the idempotent one re-ran on B with the same key; the other never ran again.
    const calls = events.filter((e) => e.type === 'tool/call') as Array<
      StoredEvent & { data: { toolCallId: string; idempotencyKey: string } }
    >;
    expect(calls.map((c) => c.data.toolCallId)).toEqual(['call-fetch', 'call-charge']);
    expect(b.executions.map((x) => [x.tool, x.key])).toEqual([['fetch', calls[0]!.data.idempotencyKey]]);
    expect(a.executions.find((x) => x.tool === 'fetch')!.key).toBe(calls[0]!.data.idempotencyKey);
    // No step was executed by two workers: one model decision and one end per step.
    const perStep = (type: string) => events.filter((e) => e.type === type).map((e) => e.step);
    expect(perStep('assistant/message')).toEqual([1, 2]);
    expect(perStep('step/end')).toEqual([1, 2]);
    // The run ran once to its end, under B.
    const statuses = events.filter((e) => e.type === 'run/status').map((e) => (e.data as { to: string }).to);
    expect(statuses).toEqual(['queued', 'running', 'completed']);
    expect(events.filter((e) => e.type === 'turn/end').map((e) => (e.data as { reason: string }).reason)).toEqual([
      'completed',
    ]);
    expect(events.at(-1)).toMatchObject({ type: 'run/status', data: { to: 'completed', attempt: 2 } });
    expect(await a.store.runs.get(run.id)).toMatchObject({ status: 'completed', lease: null });
  }

  it('a worker that believes it still holds the lease is refused every write (FencedError)', async () => {
    // Frozen in the worst way: A's renewals never reach the store, yet A is told they succeeded,
    // so A never learns it lost the run. Only the fencing token stands between A and the log.
    const t = await takeover((store) => {
      const renew = store.claims.renewLease.bind(store);
      let frozen = true;
      store.claims.renewLease = (...args) => (frozen ? Promise.resolve(true) : renew(...args));
      return { unfreeze: () => (frozen = false) };
    });
    const { a, byA, executionA } = t;
    const before = (await a.store.events.read(t.session.id)).length;

    // A wakes up: its tools return, and it tries to record their results.
    a.gate.resolve();
    await executionA.done;
    expect(a.executions.map((x) => x.signal.aborted)).toEqual([false, false]); // A never noticed: it really tried
    const fenced = byA.refused.filter((e) => e instanceof FencedError);
    expect(fenced.length).toBeGreaterThan(0);
    expect(byA.refused.every((e) => e instanceof FencedError)).toBe(true);
    expect((await a.store.events.read(t.session.id)).length).toBe(before);
    // A's worker claims nothing more (B holds the run with a live lease).
    await t.workerA.stop({ graceMs: 100 });
    expect(await a.store.runs.get(t.run.id)).toMatchObject({
      status: 'running',
      lease: { owner: 'B' },
      fencingToken: 2,
    });

    await finalChecks(t);
  });

  it('a worker whose renewals resume learns it lost the run: its tools are aborted and it writes nothing', async () => {
    // Frozen as by SIGSTOP: A's renewals hang; when A resumes they reach the store, which refuses them.
    const t = await takeover((store) => {
      const renew = store.claims.renewLease.bind(store);
      const thaw = deferred();
      store.claims.renewLease = async (...args) => {
        await thaw.promise;
        return renew(...args);
      };
      return { unfreeze: () => thaw.resolve() };
    });
    const { a, byA, executionA } = t;
    const before = (await a.store.events.read(t.session.id)).length;

    t.frozen.unfreeze();
    await executionA.done;
    // A's next renewal was refused (the token moved on): A aborted its own tools and wrote nothing.
    expect(a.executions.map((x) => x.signal.aborted)).toEqual([true, true]);
    expect(byA.refused.every((e) => e instanceof FencedError || (e as Error).message.includes('let go'))).toBe(true);
    expect((await a.store.events.read(t.session.id)).length).toBe(before);
    await t.workerA.stop({ graceMs: 100 });

    await finalChecks(t);
  });

  it('a worker that claims its own run again (its lease expired while it was stuck) keeps track of the new execution', async () => {
    const path = join(dir, 'keel.db');
    const store = new SqliteStore({ path });
    const gates = [deferred(), deferred()];
    const started = [deferred(), deferred()];
    const executions: Array<{ key: string; signal: AbortSignal }> = [];
    const agent = defineAgent({
      name: 'stuck',
      // The call of an idempotent tool is not durable before it runs (ADR-0008): the recovered
      // step asks the model again, which (as a real one would, given the same conversation) calls
      // the tool again; the same call id gives the same idempotency key.
      model: new ScriptedModel(
        [
          (call) =>
            call.prompt.some((m) => m.role === 'tool')
              ? { text: 'done' }
              : { toolCalls: [{ id: 'call-1', name: 'fetch', input: {} }] },
        ],
        { loop: true },
      ),
      tools: [
        tool({
          name: 'fetch',
          description: 'safe to repeat',
          input: z.object({}),
          idempotent: true,
          execute: async (_, ctx) => {
            const i = executions.push({ key: ctx.idempotencyKey, signal: ctx.signal }) - 1;
            started[i]!.resolve();
            await gates[i]!.promise; // ignores its abort signal
            return `fetch #${i + 1}`;
          },
        }),
      ],
    });
    // The live execution renews every 50 ms: a 1 s lease leaves it room on a slow machine.
    const rt = createRuntime({ store, agents: [agent], leaseMs: 1000, renewEveryMs: 50, maxAttempts: 10 });
    sides = [{ rt, store, executions: [], started: started[0]!, gate: gates[1]! }];
    // The first execution is stuck: its renewals never reach the store (yet it believes they did).
    const renew = store.claims.renewLease.bind(store);
    store.claims.renewLease = (id, owner, token, expiresAt) =>
      token === 1 ? Promise.resolve(true) : renew(id, owner, token, expiresAt);

    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'fetch');
    const worker = rt.startWorker({ id: 'W', concurrency: 2, pollMs: 20 });
    await started[0]!.promise;
    const first = rt.executions.get(run.id)!;
    // The lease expires; the same worker claims the run again (token 2) and re-executes the call.
    await started[1]!.promise;
    expect(await store.runs.get(run.id)).toMatchObject({
      status: 'running',
      lease: { owner: 'W' },
      fencingToken: 2,
      attempt: 2,
    });
    expect(executions[1]!.key).toBe(executions[0]!.key);

    // The stuck execution wakes up: refused, it ends; the worker still counts the live one.
    gates[0]!.resolve();
    await first.done;
    await flush();
    expect(worker.active).toBe(1);

    // And a graceful stop hands the live one back at its next boundary.
    const stopped = worker.stop({ graceMs: 60_000 });
    gates[1]!.resolve();
    await stopped;
    expect(await store.runs.get(run.id)).toMatchObject({ status: 'queued', lease: null });
    const events = await store.events.read(session.id);
    const results = events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { output: unknown }).output);
    expect(results).toEqual([{ type: 'text', value: 'fetch #2' }]);
    expect(events.filter((e) => e.type === 'run/interrupted')).toHaveLength(1);
  });
});

describe('lease renewal', () => {
  it('a transient store error while renewing is retried, not taken for a lost lease: the run goes on with the same worker', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const gate = deferred<string>();
    const started = deferred();
    const agent = defineAgent({
      name: 'renew',
      model: new ScriptedModel([{ toolCalls: [{ id: 'w1', name: 'work', input: {} }] }, { text: 'done' }]),
      tools: [
        tool({
          name: 'work',
          description: 'takes a while',
          input: z.object({}),
          execute: async () => {
            started.resolve();
            return gate.promise;
          },
        }),
      ],
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: 1_000, renewEveryMs: 20 });
    try {
      const renew = store.claims.renewLease.bind(store);
      let failures = 0;
      store.claims.renewLease = async (...args) => {
        if (failures < 3) {
          failures++;
          throw new Error('database is locked (SQLITE_BUSY)');
        }
        return renew(...args);
      };
      const session = await rt.sessions.create();
      const { run } = await rt.sessions.send(session.id, 'go');
      rt.startWorker({ id: 'W', pollMs: 20 });
      await started.promise;
      // Several renewals fail, then succeed again, all within the lease.
      while (failures < 3) await new Promise((r) => setTimeout(r, 10));
      await new Promise((r) => setTimeout(r, 60));
      gate.resolve('worked');
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
      expect(done).toMatchObject({ status: 'completed', attempt: 1 });
      const events = await store.events.read(session.id);
      expect(events.filter((e) => e.type === 'run/interrupted')).toEqual([]);
      expect(events.filter((e) => e.type === 'tool/result').map((e) => (e.data as { output: unknown }).output)).toEqual(
        [{ type: 'text', value: 'worked' }],
      );
    } finally {
      await rt.close({ graceMs: 0 });
      await store.close();
    }
  });
});

describe('idempotent tools and fencing', () => {
  it('a worker that lost its run without knowing it (no durable point before idempotent tools) starts none of them', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const executed: string[] = [];
    const modelStarted = deferred();
    const agent = defineAgent({
      name: 'fenced',
      // The model call takes a while; meanwhile another worker takes the run over.
      model: new ScriptedModel(
        [
          (call) => {
            modelStarted.resolve();
            return call.prompt.some((m) => m.role === 'tool')
              ? { text: 'done' }
              : { delayMs: 600, toolCalls: [{ id: 'f1', name: 'fetch', input: {} }] };
          },
        ],
        { loop: true },
      ),
      tools: [
        tool({
          name: 'fetch',
          description: 'safe to repeat',
          input: z.object({}),
          idempotent: true,
          execute: () => void executed.push('fetch'),
        }),
      ],
    });
    // A short lease that is never renewed in time (renewals far apart): it expires during the model call.
    const rt = createRuntime({ store, agents: [agent], leaseMs: 300, renewEveryMs: 30_000 });
    try {
      const session = await rt.sessions.create();
      const { run } = await rt.sessions.send(session.id, 'go');
      // One slot: the worker does not claim its own expired run again meanwhile.
      const worker = rt.startWorker({ id: 'A', pollMs: 20, concurrency: 1 });
      await modelStarted.promise;
      // Past the lease, another worker claims the run: the fencing token moves on.
      await new Promise((r) => setTimeout(r, 350));
      await store.runs.update(run.id, { fence: true });
      const execution = rt.executions.get(run.id)!;
      await execution.done;
      expect(executed).toEqual([]);
      // Nothing of the step was written by A.
      const events = await store.events.read(session.id);
      expect(events.filter((e) => e.type === 'tool/call' || e.type === 'assistant/message')).toEqual([]);
      await worker.stop({ graceMs: 0 });
    } finally {
      await rt.close({ graceMs: 0 });
      await store.close();
    }
  });
});

describe('deltas and the lease', () => {
  it('an execution past its lease streams no more deltas (they would take the ids of the next owner’s)', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const chunks = Array.from({ length: 30 }, (_, i) => `c${i} `);
    const agent = defineAgent({
      name: 'slow-stream',
      model: new ScriptedModel([{ chunks, chunkDelayMs: 30 }], { loop: true }),
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: 300, renewEveryMs: 50, maxAttempts: 10 });
    // The first execution's renewals never come back: its lease runs out while it streams.
    store.claims.renewLease = (_id, _owner, token) =>
      token === 1 ? new Promise<boolean>(() => {}) : Promise.resolve(true);
    const session = await rt.sessions.create();
    const deltas: Array<{ at: number; messageId: string }> = [];
    const off = rt.sessions.log.subscribeAll(
      (_s, item) => item.kind === 'delta' && deltas.push({ at: Date.now(), messageId: item.delta.messageId }),
    );
    await rt.sessions.send(session.id, 'go');
    const claimedAt = Date.now();
    rt.startWorker({ id: 'W', concurrency: 1, pollMs: 20 });
    await until('the first deltas', async () => deltas.length > 0);
    await new Promise((r) => setTimeout(r, 1_200));
    off();
    const first = deltas.filter((d) => d.messageId === deltas[0]!.messageId);
    expect(first.length).toBeGreaterThan(0);
    expect(first.length).toBeLessThan(chunks.length);
    // Nothing after the lease ran out (300 ms after the claim, with room for a late timer).
    expect(Math.max(...first.map((d) => d.at)) - claimedAt).toBeLessThan(300 + 100);
    await rt.close({ graceMs: 0 });
    await store.close();
  });

  it('a renewal that comes late releases the deltas held while the lease had run out, in order', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const chunks = Array.from({ length: 30 }, (_, i) => `c${i} `);
    const agent = defineAgent({
      name: 'slow-stream',
      model: new ScriptedModel([{ chunks, chunkDelayMs: 20 }], { loop: true }),
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: 300, renewEveryMs: 50, maxAttempts: 10 });
    // Renewals take 400 ms to come back: the lease runs out by this process's clock before each.
    const renew = store.claims.renewLease.bind(store);
    store.claims.renewLease = async (...a) => (await new Promise((r) => setTimeout(r, 400)), renew(...a));
    const session = await rt.sessions.create();
    const texts: string[] = [];
    const off = rt.sessions.log.subscribeAll(
      (_s, item) => item.kind === 'delta' && item.delta.type === 'text/delta' && texts.push(item.delta.delta),
    );
    const { run } = await rt.sessions.send(session.id, 'go');
    rt.startWorker({ id: 'W', concurrency: 1, pollMs: 20 });
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    off();
    expect(texts.join('')).toBe(chunks.join(''));
    await rt.close({ graceMs: 0 });
    await store.close();
  });
});
