/**
 * The runs part of the storage contract: every backend of the port (src/store/port/) must pass
 * this suite, next to the event-log contract (contract.ts).
 *
 * It tests port semantics only: run rows and their compare-and-set updates, the one-active-run
 * rule, claims with leases and fencing tokens, fenced appends, checkpoints and queued inputs.
 * `open()` must return a fresh, empty store each time and a `cleanup()` that closes it (and any
 * store `another()` opened) and removes whatever it created. `another()`, when the backend can
 * share a database between store instances (a file, a server), opens a second instance on the
 * same database: races then run between two instances, as between two processes.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CLAIM_POLICY } from '../../src/runs/lifecycle/run-status.ts';
import {
  FencedError,
  NotFoundError,
  RunBusyError,
  RunConflictError,
  StoreError,
  type EventDraft,
  type NewRun,
  type RunInput,
  type RunQuery,
  type RunRecord,
  type Store,
} from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const T0 = 1_700_000_000_000;
const LEASE = 30_000;

const note = (overrides: Partial<EventDraft> = {}): EventDraft => ({
  id: randomUUID(),
  type: 'test/note',
  v: 1,
  time: T0,
  entry: false,
  data: { n: 1 },
  ...overrides,
});

/** Catches what `p` rejects with; fails the test if it resolves. */
async function rejection(p: Promise<unknown>): Promise<unknown> {
  try {
    await p;
  } catch (e) {
    return e;
  }
  throw new Error('expected a rejection, but it resolved');
}

export function runsContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`runs contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;

    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });

    afterEach(async () => {
      await opened.cleanup();
    });

    const session = async (id: string = randomUUID()) => (await store.sessions.create({ id, createdAt: T0 })).id;
    const newRun = (sessionId: string, overrides: Partial<NewRun> = {}): NewRun => ({
      id: randomUUID(),
      sessionId,
      agent: { name: 'agent', version: '1' },
      agentSpec: { model: 'scripted' },
      createdAt: T0,
      ...overrides,
    });
    const run = async (sessionId?: string, overrides: Partial<NewRun> = {}) =>
      store.runs.create(newRun(sessionId ?? (await session()), overrides));
    /** A run claimed by `owner` (the only claimable one), at `now`. */
    const claimed = async (owner = 'w1', now = T0) => {
      const r = await run();
      const c = await store.claims.claim(owner, LEASE, now, CLAIM_POLICY, { runId: r.id });
      expect(c).toBeDefined();
      return c!.run;
    };

    describe('runs.create', () => {
      it('creates a queued run with defaults and reads it back', async () => {
        const s = await session('s1');
        const created = await store.runs.create({
          id: 'r1',
          sessionId: s,
          agent: { name: 'a', version: '2' },
          agentSpec: { tools: ['x'] },
          createdAt: T0,
        });
        expect(created).toEqual({
          id: 'r1',
          sessionId: 's1',
          parentRunId: null,
          parentToolCallId: null,
          rerunOf: null,
          agent: { name: 'a', version: '2' },
          agentSpec: { tools: ['x'] },
          status: 'queued',
          queuedBehind: false,
          triggerMessageId: null,
          turn: null,
          createdAt: T0,
          startedAt: null,
          endedAt: null,
          attempt: 0,
          usage: {},
          cost: 0,
          error: null,
          waiting: null,
          lease: null,
          fencingToken: 0,
          cancelRequested: false,
          pauseRequested: false,
          deadlineAt: null,
          options: {},
        } satisfies RunRecord);
        expect(await store.runs.get('r1')).toEqual(created);
        expect(await store.runs.active(s)).toEqual(created);
        // A record read back is a plain value: copied, serialized, changed like any object, and a
        // change to it is not the store's.
        const read = (await store.runs.get('r1'))!;
        expect(JSON.parse(JSON.stringify(read))).toEqual(created);
        expect({ ...read }).toEqual(created);
        read.agentSpec = { tools: ['y'] };
        expect(read.agentSpec).toEqual({ tools: ['y'] });
        expect((await store.runs.get('r1'))!.agentSpec).toEqual({ tools: ['x'] });
      });

      it('stores every given field, including the parent run and its tool call', async () => {
        const parent = await run();
        const s = await session();
        const child = await store.runs.create(
          newRun(s, {
            parentRunId: parent.id,
            parentToolCallId: 'call_1',
            triggerMessageId: 'm1',
            turn: 3,
            deadlineAt: T0 + 5000,
            options: { timeoutMs: 5000, nested: { a: [1, 2] } },
            usage: { inputTokens: 7 },
          }),
        );
        expect(child).toMatchObject({
          parentRunId: parent.id,
          parentToolCallId: 'call_1',
          triggerMessageId: 'm1',
          turn: 3,
          deadlineAt: T0 + 5000,
          options: { timeoutMs: 5000, nested: { a: [1, 2] } },
          usage: { inputTokens: 7 },
        });
        expect(await store.runs.get(child.id)).toEqual(child);
        expect(await store.runs.list({ parentRunId: parent.id, limit: 10 })).toEqual([child]);
      });

      it('returns undefined for an unknown run and no active run for a session without one', async () => {
        const s = await session();
        expect(await store.runs.get('nope')).toBeUndefined();
        expect(await store.runs.active(s)).toBeUndefined();
      });

      it('refuses a run of an unknown session with NotFoundError, and a duplicate id with a conflict', async () => {
        expect(await rejection(store.runs.create(newRun('no-such-session')))).toBeInstanceOf(NotFoundError);
        const r = await run();
        await store.runs.update(r.id, { status: 'completed' });
        const dup = await rejection(store.runs.create(newRun(r.sessionId, { id: r.id })));
        expect(dup).toBeInstanceOf(StoreError);
        expect((dup as StoreError).code).toBe('conflict');
        expect((await store.runs.get(r.id))!.status).toBe('completed');
      });
    });

    describe('listRuns by tenant', () => {
      it("a tenant's runs only (its sessions' tenant), in id order after the cursor, with other filters", async () => {
        const ids = (rs: RunRecord[]) => rs.map((r) => r.id);
        const of = async (tenant: string) =>
          (await store.sessions.create({ id: randomUUID(), tenant, createdAt: T0 })).id;
        // Ids in creation order, the tenants interleaved; one waiting and one completed run each.
        const made: Array<{ tenant: string; run: RunRecord }> = [];
        for (let i = 0; i < 6; i++) {
          const tenant = i % 2 === 0 ? 'acme' : 'globex';
          const r = await store.runs.create(newRun(await of(tenant), { id: `run-${i}` }));
          made.push({ tenant, run: r });
          if (i % 3 === 0) await store.runs.update(r.id, { status: 'waiting_approval' });
          if (i % 3 === 1) await store.runs.update(r.id, { status: 'waiting_for_user' });
        }
        const acme = made.filter((m) => m.tenant === 'acme').map((m) => m.run.id);
        expect(ids(await store.runs.list({ tenant: 'acme', limit: 100 }))).toEqual(acme);
        expect(
          ids(
            await store.runs.list({ tenant: 'acme', statuses: ['waiting_approval', 'waiting_for_user'], limit: 100 }),
          ),
        ).toEqual(['run-0', 'run-4']);
        expect(
          ids(
            await store.runs.list({ tenant: 'globex', statuses: ['waiting_approval', 'waiting_for_user'], limit: 100 }),
          ),
        ).toEqual(['run-1', 'run-3']);
        expect(
          ids(
            await store.runs.list({
              tenant: 'globex',
              statuses: ['waiting_approval', 'waiting_for_user'],
              after: 'run-1',
              limit: 100,
            }),
          ),
        ).toEqual(['run-3']);
        expect(ids(await store.runs.list({ tenant: 'acme', limit: 1, after: 'run-0' }))).toEqual(['run-2']);
        expect(await store.runs.list({ tenant: 'nobody', limit: 100 })).toEqual([]);
      });
    });

    describe('reruns and listRuns by agent and creation time', () => {
      it('a rerun reads back the run it re-runs; any other run reads null; list({ rerunOf }) is the reruns of that run', async () => {
        const original = await run();
        expect(original.rerunOf).toBeNull();
        expect((await store.runs.get(original.id))!.rerunOf).toBeNull();
        const other = await run(undefined, { rerunOf: null });
        expect(other.rerunOf).toBeNull();
        // Reruns of the original, in sessions of their own, with their lineage in the options too.
        const reruns: RunRecord[] = [];
        for (const id of ['rerun-b', 'rerun-a', 'rerun-c']) {
          const r = await run(undefined, { id, rerunOf: original.id, options: { rerun: { of: original.id } } });
          expect(r).toMatchObject({ rerunOf: original.id, options: { rerun: { of: original.id } } });
          expect(await store.runs.get(id)).toEqual(r);
          reruns.push(r);
        }
        // A rerun of a rerun is that rerun's, not the original's.
        const again = await run(undefined, { id: 'rerun-d', rerunOf: 'rerun-a' });
        await run(undefined, { rerunOf: other.id });
        const byId = [...reruns].sort((a, b) => (a.id < b.id ? -1 : 1));
        expect(await store.runs.list({ rerunOf: original.id, limit: 10 })).toEqual(byId);
        expect(await store.runs.list({ rerunOf: 'rerun-a', limit: 10 })).toEqual([again]);
        expect(await store.runs.list({ rerunOf: 'rerun-b', limit: 10 })).toEqual([]);
        expect(await store.runs.list({ rerunOf: 'no-such-run', limit: 10 })).toEqual([]);
        // The same id-ordered pages as every list.
        expect(await store.runs.list({ rerunOf: original.id, limit: 2 })).toEqual(byId.slice(0, 2));
        expect(await store.runs.list({ rerunOf: original.id, after: 'rerun-b', limit: 2 })).toEqual(byId.slice(2));
        // With the other filters: a rerun that ended is not among the queued ones.
        await store.runs.update('rerun-b', { status: 'completed' });
        expect(
          (await store.runs.list({ rerunOf: original.id, statuses: ['queued'], limit: 10 })).map((r) => r.id),
        ).toEqual(['rerun-a', 'rerun-c']);
      });

      it("filters by agent name and version and by creation time [createdFrom, createdTo), with a tenant's runs, in id order after the cursor", async () => {
        const of = async (tenant: string) =>
          (await store.sessions.create({ id: randomUUID(), tenant, createdAt: T0 })).id;
        const ids = (rs: RunRecord[]) => rs.map((r) => r.id);
        // Ids in creation order; tenants, agents and versions interleaved; one second apart.
        for (let i = 0; i < 8; i++) {
          await store.runs.create(
            newRun(await of(i % 2 === 0 ? 'acme' : 'globex'), {
              id: `run-${i}`,
              agent: { name: i % 4 < 2 ? 'planner' : 'coder', version: i < 4 ? '1' : '2' },
              createdAt: T0 + i * 1000,
            }),
          );
        }
        const list = async (q: Omit<RunQuery, 'limit'>, limit = 100) => ids(await store.runs.list({ ...q, limit }));
        expect(await list({ agentName: 'planner' })).toEqual(['run-0', 'run-1', 'run-4', 'run-5']);
        expect(await list({ agentName: 'coder', agentVersion: '2' })).toEqual(['run-6', 'run-7']);
        expect(await list({ agentVersion: '1' })).toEqual(['run-0', 'run-1', 'run-2', 'run-3']);
        expect(await list({ agentName: 'nobody' })).toEqual([]);
        // From is inclusive, to exclusive.
        expect(await list({ createdFrom: T0 + 2000 })).toEqual(['run-2', 'run-3', 'run-4', 'run-5', 'run-6', 'run-7']);
        expect(await list({ createdTo: T0 + 2000 })).toEqual(['run-0', 'run-1']);
        expect(await list({ createdFrom: T0 + 2000, createdTo: T0 + 5000 })).toEqual(['run-2', 'run-3', 'run-4']);
        expect(await list({ createdFrom: T0 + 1500, createdTo: T0 + 1500 })).toEqual([]);
        // Combined with a tenant and with each other.
        expect(await list({ tenant: 'acme', agentName: 'planner' })).toEqual(['run-0', 'run-4']);
        expect(await list({ tenant: 'globex', agentName: 'coder', agentVersion: '1' })).toEqual(['run-3']);
        expect(await list({ tenant: 'acme', createdFrom: T0 + 2000, createdTo: T0 + 6000 })).toEqual([
          'run-2',
          'run-4',
        ]);
        expect(await list({ tenant: 'globex', agentName: 'planner', createdFrom: T0, createdTo: T0 + 5000 })).toEqual([
          'run-1',
        ]);
        expect(await list({ tenant: 'globex', agentVersion: '2', createdTo: T0 + 6000 })).toEqual(['run-5']);
        // Pages in id order, after the cursor.
        expect(await list({ tenant: 'acme', createdFrom: T0 + 1000 }, 2)).toEqual(['run-2', 'run-4']);
        expect(await list({ tenant: 'acme', createdFrom: T0 + 1000, after: 'run-4' }, 2)).toEqual(['run-6']);
        expect(await list({ agentName: 'coder', after: 'run-3' }, 1)).toEqual(['run-6']);
        expect(await list({ tenant: 'nobody', agentName: 'planner' })).toEqual([]);
      });
    });

    describe('one active run per session', () => {
      it('refuses a second active run with RunBusyError naming the active run', async () => {
        const s = await session();
        const first = await run(s);
        for (const status of ['queued', 'running', 'waiting_approval', 'waiting_for_user', 'paused'] as const) {
          await store.runs.update(first.id, { status });
          const err = await rejection(store.runs.create(newRun(s)));
          expect(err, status).toBeInstanceOf(RunBusyError);
          expect((err as RunBusyError).activeRunId).toBe(first.id);
          expect((err as RunBusyError).code).toBe('run_busy');
          expect((err as Error).message).toContain(first.id);
        }
        expect(await store.runs.list({ sessionId: s, limit: 10 })).toHaveLength(1);
      });

      it('a terminal run does not block a new one', async () => {
        const s = await session();
        const ended: string[] = [];
        for (const status of ['completed', 'failed', 'cancelled', 'timed_out'] as const) {
          const r = await run(s);
          await store.runs.update(r.id, { status, endedAt: T0 });
          ended.push(r.id);
        }
        const active = await run(s);
        expect((await store.runs.active(s))!.id).toBe(active.id);
        expect((await store.runs.list({ sessionId: s, limit: 10 })).map((r) => r.id).sort()).toEqual(
          [...ended, active.id].sort(),
        );
      });

      it('other sessions are not affected', async () => {
        const a = await run();
        const b = await run();
        expect((await store.runs.active(a.sessionId))!.id).toBe(a.id);
        expect((await store.runs.active(b.sessionId))!.id).toBe(b.id);
      });

      it('two racing createRun calls on one session: exactly one wins, the other gets RunBusyError', async () => {
        const s = await session();
        const other = opened.another ? await opened.another() : store;
        for (let round = 0; round < 5; round++) {
          const attempts = [newRun(s), newRun(s)];
          const results = await Promise.allSettled([store.runs.create(attempts[0]!), other.runs.create(attempts[1]!)]);
          const won = results.flatMap((r) => (r.status === 'fulfilled' ? [r.value] : []));
          const lost = results.flatMap((r) => (r.status === 'rejected' ? [r.reason as unknown] : []));
          expect(won).toHaveLength(1);
          expect(lost).toHaveLength(1);
          expect(lost[0]).toBeInstanceOf(RunBusyError);
          expect((lost[0] as RunBusyError).activeRunId).toBe(won[0]!.id);
          // Both instances agree on the winner.
          expect((await store.runs.active(s))!.id).toBe(won[0]!.id);
          expect((await other.runs.active(s))!.id).toBe(won[0]!.id);
          await other.runs.update(won[0]!.id, { status: 'cancelled', endedAt: T0 });
        }
        expect(await store.runs.list({ sessionId: s, limit: 100 })).toHaveLength(5);
      });
    });

    describe('runs.countByStatus', () => {
      it('counts runs by status as they are created and move, every status present, and a rolled-back move changes nothing', async () => {
        const before = await store.runs.countByStatus();
        expect(Object.keys(before).sort()).toEqual([
          'cancelled',
          'completed',
          'failed',
          'paused',
          'queued',
          'running',
          'sleeping',
          'timed_out',
          'waiting_approval',
          'waiting_for_quota',
          'waiting_for_signal',
          'waiting_for_user',
        ]);
        const a = await run();
        const b = await run();
        await run();
        await store.runs.update(a.id, { status: 'running' });
        await store.runs.update(b.id, { status: 'completed', endedAt: T0 });
        await store.runs.update(b.id, { status: 'completed' });
        await expect(
          store.transaction(async (tx) => {
            await tx.runs.update(a.id, { status: 'waiting_approval' });
            throw new Error('roll back');
          }),
        ).rejects.toThrow('roll back');
        const after = await store.runs.countByStatus();
        const delta = Object.fromEntries(
          Object.entries(after)
            .map(([k, v]) => [k, v - before[k as keyof typeof before]])
            .filter(([, v]) => v !== 0),
        );
        expect(delta).toEqual({ queued: 1, running: 1, completed: 1 });
      });
    });

    describe('runs.usageTotals', () => {
      const H = 3_600_000;
      const DAY = Date.UTC(2025, 0, 10);
      const GPT = { provider: 'openai', modelId: 'gpt-a' };
      const CLAUDE = { provider: 'anthropic', modelId: 'claude-b' };
      const usage = (inputTokens: number, outputTokens: number, cachedInputTokens = 0, reasoningTokens = 0) => ({
        inputTokens,
        outputTokens,
        cachedInputTokens,
        reasoningTokens,
      });
      /** A run in a session of its own, ended at `endedAt` (null: still running) with this recorded usage. */
      const recorded = async (o: {
        tenant: string;
        agent: string;
        model?: { provider: string; modelId: string };
        usage: ReturnType<typeof usage>;
        cost: number;
        endedAt: number | null;
        parent?: string;
      }) => {
        const sessionId = randomUUID();
        await store.sessions.create({ id: sessionId, tenant: o.tenant, createdAt: T0 });
        const r = await store.runs.create({
          id: randomUUID(),
          sessionId,
          parentRunId: o.parent ?? null,
          agent: { name: o.agent, version: '1' },
          agentSpec: o.model ? { name: o.agent, model: o.model, system: 'secret instructions' } : { name: o.agent },
          createdAt: T0,
        });
        return store.runs.update(r.id, {
          status: o.endedAt === null ? 'running' : 'completed',
          endedAt: o.endedAt,
          usage: o.usage,
          cost: o.cost,
        });
      };
      /**
       * P (tenant a, planner on gpt) called a subagent C (researcher on claude), which called G; P
       * also has a child D still running. A parent's recorded usage includes its ended children's
       * (as the runs layer rolls them up). Q is tenant b's; R still runs; S ended long before; E's
       * session is erased.
       */
      const world = async () => {
        const P0 = await recorded({
          tenant: 'a',
          agent: 'planner',
          model: GPT,
          usage: usage(0, 0),
          cost: 0,
          endedAt: null,
        });
        const C0 = await recorded({
          tenant: 'a',
          agent: 'researcher',
          model: CLAUDE,
          usage: usage(0, 0),
          cost: 0,
          endedAt: null,
          parent: P0.id,
        });
        const G = await recorded({
          tenant: 'a',
          agent: 'researcher',
          model: CLAUDE,
          usage: usage(1, 1),
          cost: 0.01,
          endedAt: DAY + 10.5 * H,
          parent: C0.id,
        });
        const C = await store.runs.update(C0.id, {
          status: 'completed',
          endedAt: DAY + 11 * H,
          usage: usage(40 + 1, 4 + 1, 0, 1),
          cost: 0.25 + 0.01,
        });
        await recorded({
          tenant: 'a',
          agent: 'researcher',
          model: CLAUDE,
          usage: usage(500, 50),
          cost: 5,
          endedAt: null,
          parent: P0.id,
        });
        const P = await store.runs.update(P0.id, {
          status: 'completed',
          endedAt: DAY + 12 * H,
          usage: usage(100 + 41, 10 + 5, 5, 2 + 1),
          cost: 1 + 0.26,
        });
        const Q = await recorded({
          tenant: 'b',
          agent: 'planner',
          model: GPT,
          usage: usage(7, 3),
          cost: 0.5,
          endedAt: DAY + 24.5 * H,
        });
        await recorded({ tenant: 'a', agent: 'planner', model: GPT, usage: usage(999, 999), cost: 9, endedAt: null });
        await recorded({
          tenant: 'a',
          agent: 'planner',
          model: GPT,
          usage: usage(888, 888),
          cost: 8,
          endedAt: DAY - 9 * 24 * H,
        });
        const E = await recorded({
          tenant: 'a',
          agent: 'planner',
          model: GPT,
          usage: usage(10, 1),
          cost: 0.1,
          endedAt: DAY + 12 * H + 5 * 60_000,
        });
        await store.sessions.erase(E.sessionId, DAY + 13 * H);
        return { P, C, G, Q, E };
      };
      const range = { from: DAY, to: DAY + 2 * 24 * H };
      /** In a fixed order (the store's is unspecified): by their keys, whatever order those were written in. */
      const sorted = <T>(xs: T[]) => [...xs].sort((x, y) => (key(x) < key(y) ? -1 : 1));
      const key = (x: unknown): string =>
        Array.isArray(x)
          ? JSON.stringify(x)
          : JSON.stringify(Object.entries(x as object).sort(([a], [b]) => (a < b ? -1 : 1)));
      const rounded = <T extends { cost: number }>(xs: T[]) =>
        sorted(xs.map((x) => ({ ...x, cost: Math.round(x.cost * 1e6) / 1e6 })));

      it("counts each ended run's own usage once: a parent's recorded total less its ended children's; runs not ended and outside the range are left out", async () => {
        await world();
        expect(rounded(await store.runs.usageTotals({ ...range, groupBy: [] }))).toEqual([
          {
            runs: 5,
            inputTokens: 100 + 40 + 1 + 7 + 10,
            outputTokens: 10 + 4 + 1 + 3 + 1,
            cachedInputTokens: 5,
            reasoningTokens: 3,
            cost: 1 + 0.25 + 0.01 + 0.5 + 0.1,
          },
        ]);
        expect(rounded(await store.runs.usageTotals({ ...range, groupBy: ['tenant'] }))).toEqual(
          sorted([
            {
              tenant: 'a',
              runs: 4,
              inputTokens: 151,
              outputTokens: 16,
              cachedInputTokens: 5,
              reasoningTokens: 3,
              cost: 1.36,
            },
            {
              tenant: 'b',
              runs: 1,
              inputTokens: 7,
              outputTokens: 3,
              cachedInputTokens: 0,
              reasoningTokens: 0,
              cost: 0.5,
            },
          ]),
        );
      });

      it('groups by agent and model: a subagent run counts under its own agent and model, and an erased session keeps its model', async () => {
        const { E } = await world();
        expect((await store.runs.get(E.id))!.agentSpec).toEqual({ model: GPT });
        expect(rounded(await store.runs.usageTotals({ ...range, groupBy: ['agent', 'model'] }))).toEqual(
          sorted([
            {
              agent: 'planner',
              model: 'openai:gpt-a',
              runs: 3,
              inputTokens: 117,
              outputTokens: 14,
              cachedInputTokens: 5,
              reasoningTokens: 2,
              cost: 1.6,
            },
            {
              agent: 'researcher',
              model: 'anthropic:claude-b',
              runs: 2,
              inputTokens: 41,
              outputTokens: 5,
              cachedInputTokens: 0,
              reasoningTokens: 1,
              cost: 0.26,
            },
          ]),
        );
      });

      it('buckets by the UTC day or hour the run ended in (the start of the bucket, in ms)', async () => {
        await world();
        const days = await store.runs.usageTotals({ ...range, groupBy: ['day'] });
        expect(sorted(days.map((d) => [d.bucket, d.runs, d.inputTokens]))).toEqual([
          [DAY, 4, 151],
          [DAY + 24 * H, 1, 7],
        ]);
        const hours = await store.runs.usageTotals({ ...range, groupBy: ['tenant', 'hour'], tenant: 'a' });
        expect(sorted(hours.map((h) => [h.tenant, h.bucket, h.runs, h.inputTokens]))).toEqual([
          ['a', DAY + 10 * H, 1, 1],
          ['a', DAY + 11 * H, 1, 40],
          ['a', DAY + 12 * H, 2, 110],
        ]);
      });

      it('filters by tenant, agent and model; the range is [from, to); nothing is an empty list', async () => {
        const { P } = await world();
        expect(
          (await store.runs.usageTotals({ ...range, groupBy: [], agent: 'researcher' })).map((t) => [
            t.runs,
            t.inputTokens,
          ]),
        ).toEqual([[2, 41]]);
        expect(
          (await store.runs.usageTotals({ ...range, groupBy: ['tenant'], model: 'openai:gpt-a', tenant: 'b' })).map(
            (t) => [t.tenant, t.runs, t.inputTokens],
          ),
        ).toEqual([['b', 1, 7]]);
        expect(
          (await store.runs.usageTotals({ from: P.endedAt!, to: P.endedAt! + 1, groupBy: [] })).map(
            (t) => t.inputTokens,
          ),
        ).toEqual([100]);
        expect(await store.runs.usageTotals({ from: P.endedAt! - 1, to: P.endedAt!, groupBy: [] })).toEqual([]);
        expect(await store.runs.usageTotals({ ...range, groupBy: ['model'], tenant: 'nobody' })).toEqual([]);
      });

      it('refuses day and hour together, and an unknown dimension', async () => {
        await expect(store.runs.usageTotals({ ...range, groupBy: ['day', 'hour'] })).rejects.toMatchObject({
          code: 'invalid_query',
        });
        await expect(store.runs.usageTotals({ ...range, groupBy: ['week' as 'day'] })).rejects.toMatchObject({
          code: 'invalid_query',
        });
      });
    });

    describe('runs queued behind the active one', () => {
      it('any number wait behind it: never the active run, never claimed, and one comes up only once the session has no active run', async () => {
        const s = await session();
        const first = await run(s);
        const behind = [
          await run(s, { queuedBehind: true, createdAt: T0 + 1 }),
          await run(s, { queuedBehind: true, createdAt: T0 + 2 }),
        ];
        expect(behind.map((r) => [r.status, r.queuedBehind, r.turn])).toEqual([
          ['queued', true, null],
          ['queued', true, null],
        ]);
        expect((await store.runs.active(s))!.id).toBe(first.id);
        // Still one active run: a new run that is not queued behind is refused.
        expect(await rejection(store.runs.create(newRun(s)))).toBeInstanceOf(RunBusyError);

        // The worker claims the active one, never those behind it (even asked for them by id).
        for (const r of behind)
          expect(await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY, { runId: r.id })).toBeUndefined();
        expect((await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY))!.run.id).toBe(first.id);
        expect(await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY)).toBeUndefined();

        // Coming up while the session still has an active run is refused, and changes nothing.
        const err = await rejection(store.runs.update(behind[0]!.id, { queuedBehind: false, turn: 2 }));
        expect(err).toBeInstanceOf(RunBusyError);
        expect((err as RunBusyError).activeRunId).toBe(first.id);
        expect(await store.runs.get(behind[0]!.id)).toEqual(behind[0]);

        await store.runs.update(first.id, { status: 'completed', endedAt: T0 });
        const up = await store.runs.update(behind[0]!.id, { queuedBehind: false, turn: 2 }, { statuses: ['queued'] });
        expect(up).toMatchObject({ queuedBehind: false, turn: 2, status: 'queued' });
        expect((await store.runs.active(s))!.id).toBe(up.id);
        expect(await rejection(store.runs.update(behind[1]!.id, { queuedBehind: false }))).toBeInstanceOf(RunBusyError);
        expect((await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY))!.run.id).toBe(up.id);
        // A run behind can end without coming up (cancelled before it started).
        expect(await store.runs.update(behind[1]!.id, { status: 'cancelled', endedAt: T0 })).toMatchObject({
          status: 'cancelled',
          queuedBehind: true,
        });
      });
    });

    describe('claims.due', () => {
      const waiting = (expiresAt: number | null) => ({ kind: 'sleep', calls: [], decisions: {}, expiresAt });

      it('finds runs no worker holds by the first of their wait’s deadline and their own, in order, a page at a time', async () => {
        const sleeping = await run(undefined, { deadlineAt: T0 + 500 });
        await store.runs.update(sleeping.id, { status: 'sleeping', waiting: waiting(T0 + 300) });
        const approval = await run();
        await store.runs.update(approval.id, { status: 'waiting_approval', waiting: waiting(T0 + 100) });
        const queuedWithDeadline = await run(undefined, { deadlineAt: T0 + 200 });
        const paused = await run(undefined, { deadlineAt: T0 + 400 });
        await store.runs.update(paused.id, { status: 'paused' });
        // Not due: a later deadline, a wait without one, a running run (its worker keeps its deadline), an ended run.
        const later = await run(undefined, { deadlineAt: T0 + 10_000 });
        await store.runs.update(later.id, { status: 'waiting_for_signal', waiting: waiting(null) });
        const forever = await run();
        await store.runs.update(forever.id, { status: 'waiting_for_user', waiting: waiting(null) });
        const running = await run(undefined, { deadlineAt: T0 });
        await store.runs.update(running.id, { status: 'running', waiting: waiting(T0) });
        const ended = await run(undefined, { deadlineAt: T0 });
        await store.runs.update(ended.id, { status: 'completed' });

        const all = await store.claims.due(T0 + 1000, { limit: 10 });
        expect(all.map((d) => [d.run.id, d.dueAt])).toEqual([
          [approval.id, T0 + 100],
          [queuedWithDeadline.id, T0 + 200],
          [sleeping.id, T0 + 300],
          [paused.id, T0 + 400],
        ]);
        expect(all[0]!.run).toMatchObject({ id: approval.id, status: 'waiting_approval', waiting: waiting(T0 + 100) });
        expect((await store.claims.due(T0 + 250, { limit: 10 })).map((d) => d.run.id)).toEqual([
          approval.id,
          queuedWithDeadline.id,
        ]);
        const first = await store.claims.due(T0 + 1000, { limit: 2 });
        const second = await store.claims.due(T0 + 1000, {
          limit: 2,
          after: { dueAt: first[1]!.dueAt, id: first[1]!.run.id },
        });
        expect([...first, ...second].map((d) => d.run.id)).toEqual(all.map((d) => d.run.id));
        expect(
          await store.claims.due(T0 + 1000, { limit: 2, after: { dueAt: all[3]!.dueAt, id: all[3]!.run.id } }),
        ).toEqual([]);
        expect(await store.claims.due(T0 + 99, { limit: 10 })).toEqual([]);
      });

      it('follows every change of the row: a wait that ends, a claim, a new deadline', async () => {
        const r = await run();
        await store.runs.update(r.id, { status: 'sleeping', waiting: waiting(T0 + 100) });
        expect((await store.claims.due(T0 + 100, { limit: 10 })).map((d) => d.run.id)).toEqual([r.id]);
        await store.runs.update(r.id, { status: 'queued', waiting: null });
        expect(await store.claims.due(T0 + 100, { limit: 10 })).toEqual([]);
        await store.runs.update(r.id, { deadlineAt: T0 + 50 });
        expect((await store.claims.due(T0 + 100, { limit: 10 })).map((d) => d.dueAt)).toEqual([T0 + 50]);
        await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY, { runId: r.id });
        expect(await store.claims.due(T0 + 100, { limit: 10 })).toEqual([]);
      });
    });

    describe('runs.update', () => {
      it('applies a patch of every field and returns the updated run', async () => {
        const r = await run();
        const updated = await store.runs.update(r.id, {
          status: 'waiting_approval',
          startedAt: T0 + 1,
          usage: { inputTokens: 10, outputTokens: 5 },
          cost: 0.25,
          error: { kind: 'x', message: 'm' },
          waiting: { kind: 'approval', calls: [{ toolCallId: 'c1' }], decisions: {} },
          cancelRequested: true,
          pauseRequested: true,
          deadlineAt: T0 + 99,
          turn: 4,
          agentSpec: { name: 'a', tools: [{ name: 'fx__add', mcp: { server: 'fx' } }] },
        });
        expect(updated).toEqual({
          ...r,
          status: 'waiting_approval',
          startedAt: T0 + 1,
          usage: { inputTokens: 10, outputTokens: 5 },
          cost: 0.25,
          error: { kind: 'x', message: 'm' },
          waiting: { kind: 'approval', calls: [{ toolCallId: 'c1' }], decisions: {} },
          cancelRequested: true,
          pauseRequested: true,
          deadlineAt: T0 + 99,
          turn: 4,
          agentSpec: { name: 'a', tools: [{ name: 'fx__add', mcp: { server: 'fx' } }] },
        });
        expect(await store.runs.get(r.id)).toEqual(updated);
        const cleared = await store.runs.update(r.id, {
          error: null,
          waiting: null,
          cancelRequested: false,
          pauseRequested: false,
          deadlineAt: null,
        });
        expect(cleared).toMatchObject({
          error: null,
          waiting: null,
          cancelRequested: false,
          pauseRequested: false,
          deadlineAt: null,
        });
      });

      it('is a compare-and-set on the status: RunConflictError with the current run, and nothing changed', async () => {
        const r = await run();
        const ok = await store.runs.update(r.id, { status: 'running' }, { statuses: ['queued', 'paused'] });
        expect(ok.status).toBe('running');
        const err = await rejection(
          store.runs.update(r.id, { status: 'cancelled', cost: 9 }, { statuses: ['queued'] }),
        );
        expect(err).toBeInstanceOf(RunConflictError);
        expect((err as RunConflictError).code).toBe('run_conflict');
        expect((err as RunConflictError).run).toEqual(ok);
        expect(await store.runs.get(r.id)).toEqual(ok);
      });

      it('is a compare-and-set on the fencing token', async () => {
        const r = await claimed('w1');
        expect(r.fencingToken).toBe(1);
        const ok = await store.runs.update(r.id, { cost: 1 }, { fencingToken: 1, statuses: ['running'] });
        expect(ok.cost).toBe(1);
        const err = await rejection(store.runs.update(r.id, { cost: 2 }, { fencingToken: 0 }));
        expect(err).toBeInstanceOf(RunConflictError);
        expect((err as RunConflictError).run).toEqual(ok);
        expect((await store.runs.get(r.id))!.cost).toBe(1);
      });

      it('an empty patch with a guard checks the guard without changing anything', async () => {
        const r = await run();
        expect(await store.runs.update(r.id, {}, { statuses: ['queued'] })).toEqual(r);
        expect(await rejection(store.runs.update(r.id, {}, { statuses: ['running'] }))).toBeInstanceOf(
          RunConflictError,
        );
      });

      it('fence: true bumps the fencing token, so the previous holder is fenced out', async () => {
        const r = await claimed('w1');
        const fenced = await store.runs.update(r.id, { fence: true });
        expect(fenced.fencingToken).toBe(r.fencingToken + 1);
        expect(await rejection(store.runs.update(r.id, { cost: 3 }, { fencingToken: r.fencingToken }))).toBeInstanceOf(
          RunConflictError,
        );
        expect(await store.claims.renewLease(r.id, 'w1', r.fencingToken, T0 + LEASE * 2)).toBe(false);
      });

      it('lease: null clears the lease', async () => {
        const r = await claimed('w1');
        expect(r.lease).toEqual({ owner: 'w1', expiresAt: T0 + LEASE });
        const released = await store.runs.update(r.id, { status: 'waiting_for_user', lease: null });
        expect(released.lease).toBeNull();
        expect((await store.runs.get(r.id))!.lease).toBeNull();
        expect(released.fencingToken).toBe(r.fencingToken);
      });

      it('an unknown run is a RunConflictError without a run', async () => {
        const err = await rejection(store.runs.update('nope', { cost: 1 }));
        expect(err).toBeInstanceOf(RunConflictError);
        expect((err as RunConflictError).run).toBeUndefined();
      });
    });

    describe('claims.claim', () => {
      it('claims the oldest queued run: running, leased, attempt and token increased, previous status returned', async () => {
        const newer = await run(undefined, { createdAt: T0 + 2, id: 'a-newer' });
        const oldest = await run(undefined, { createdAt: T0 + 1, id: 'z-oldest' });
        const newest = await run(undefined, { createdAt: T0 + 3, id: 'b-newest' });
        const now = T0 + 10;

        const first = await store.claims.claim('w1', LEASE, now, CLAIM_POLICY);
        expect(first).toEqual({
          previous: 'queued',
          firstStart: true,
          run: {
            ...oldest,
            status: 'running',
            lease: { owner: 'w1', expiresAt: now + LEASE },
            attempt: 1,
            fencingToken: 1,
            startedAt: now,
          },
        });
        expect(await store.runs.get(oldest.id)).toEqual(first!.run);
        expect((await store.claims.claim('w2', LEASE, now, CLAIM_POLICY))!.run.id).toBe(newer.id);
        expect((await store.claims.claim('w3', LEASE, now, CLAIM_POLICY))!.run.id).toBe(newest.id);
        expect(await store.claims.claim('w4', LEASE, now, CLAIM_POLICY)).toBeUndefined();
      });

      it('neverWait, in a transaction, with nothing held elsewhere: the same runs in the same order, a recovery included', async () => {
        const expired = await claimed('w0', T0);
        const older = await run(undefined, { createdAt: T0 + 1, id: 'nw-older' });
        const newer = await run(undefined, { createdAt: T0 + 2, id: 'nw-newer' });
        const now = T0 + 10 * LEASE;
        const taken = await store.transaction(async (tx) => {
          const ids: string[] = [];
          for (let i = 0; i < 4; i++) {
            const c = await tx.claims.claim(`w${i}`, LEASE, now, CLAIM_POLICY, { neverWait: true });
            if (c) ids.push(c.run.id);
          }
          return ids;
        });
        expect(taken).toEqual([expired.id, older.id, newer.id]);
        expect((await store.runs.get(newer.id))!.status).toBe('running');
      });

      it('never claims a waiting, paused or terminal run', async () => {
        for (const status of [
          'waiting_approval',
          'waiting_for_user',
          'paused',
          'completed',
          'failed',
          'cancelled',
          'timed_out',
        ] as const) {
          const r = await run();
          await store.runs.update(r.id, { status });
        }
        expect(await store.claims.claim('w1', LEASE, T0 + 10 * LEASE, CLAIM_POLICY)).toBeUndefined();
      });

      it('a policy without recoverable statuses takes a queued run but no run whose lease expired (a worker back from an outage, ADR-0045)', async () => {
        const held = await claimed('w1', T0);
        const readyOnly = { ...CLAIM_POLICY, recoverable: [] };
        const later = T0 + 10 * LEASE;
        expect(await store.claims.claim('w2', LEASE, later, readyOnly)).toBeUndefined();
        expect(await store.claims.claim('w2', LEASE, later, readyOnly, { runId: held.id })).toBeUndefined();
        // The owner's renewal still matches: nobody took the run.
        expect(await store.claims.renewLease(held.id, 'w1', held.fencingToken, later + LEASE)).toBe(true);
        const queued = await run();
        expect((await store.claims.claim('w2', LEASE, later, readyOnly))!.run.id).toBe(queued.id);
      });

      it('claims a running run only once its lease expired, as a new attempt with a new token', async () => {
        const r = await claimed('w1', T0);
        const expiresAt = T0 + LEASE;
        expect(await store.claims.claim('w2', LEASE, T0 + 1, CLAIM_POLICY)).toBeUndefined();
        expect(await store.claims.claim('w2', LEASE, expiresAt - 1, CLAIM_POLICY)).toBeUndefined();

        const again = await store.claims.claim('w2', LEASE, expiresAt + 1, CLAIM_POLICY);
        expect(again!.previous).toBe('running');
        expect(again!.firstStart).toBe(false);
        expect(again!.run).toMatchObject({
          id: r.id,
          status: 'running',
          lease: { owner: 'w2', expiresAt: expiresAt + 1 + LEASE },
          attempt: 2,
          fencingToken: 2,
          // The first start stays on record.
          startedAt: T0,
        });
        // The first owner is fenced out.
        expect(await store.claims.renewLease(r.id, 'w1', 1, expiresAt + 2 * LEASE)).toBe(false);
      });

      it('says a claim is a first start only for a run never claimed before (not for one handed back, resumed or retried)', async () => {
        const r = await claimed('w1', T0);
        // Handed back by its worker (a shutdown): queued again, the same attempt.
        await store.runs.update(r.id, { status: 'queued', lease: null });
        const back = await store.claims.claim('w2', LEASE, T0 + 1, CLAIM_POLICY, { runId: r.id });
        expect(back).toMatchObject({ previous: 'queued', firstStart: false, run: { attempt: 1 } });
        // Resumed after a wait.
        await store.runs.update(r.id, { status: 'waiting_approval', lease: null });
        await store.runs.update(r.id, { status: 'queued' });
        expect(await store.claims.claim('w3', LEASE, T0 + 2, CLAIM_POLICY, { runId: r.id })).toMatchObject({
          firstStart: false,
        });
        const fresh = await run();
        expect(await store.claims.claim('w1', LEASE, T0 + 3, CLAIM_POLICY, { runId: fresh.id })).toMatchObject({
          firstStart: true,
          run: { attempt: 1 },
        });
      });

      it('brings the stored checkpoint of the run with the claim, as runs.getCheckpoint reads it: where it resumes from', async () => {
        const fresh = await run();
        expect(
          (await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY, { runId: fresh.id }))!.checkpoint,
        ).toBeUndefined();
        const r = await claimed('w1', T0 + 1);
        // Claimed again before any checkpoint was stored (its lease expired): none.
        const none = await store.claims.claim('w2', LEASE, T0 + 2 + LEASE, CLAIM_POLICY, { runId: r.id });
        expect(none).toMatchObject({ firstStart: false, checkpoint: undefined });
        const state = { messages: [{ role: 'user', content: 'é 🙂' }], counters: { steps: 3 } };
        await store.runs.putCheckpoint({ runId: r.id, step: 3, seq: 7, state });
        const again = await store.claims.claim('w3', LEASE, T0 + 3 + 2 * LEASE, CLAIM_POLICY, { runId: r.id });
        expect(again!.run.id).toBe(r.id);
        expect(again!.checkpoint).toEqual({ runId: r.id, step: 3, seq: 7, state });
        expect(again!.checkpoint).toEqual(await store.runs.getCheckpoint(r.id));
      });

      it('a running run without a lease is not claimable', async () => {
        const r = await claimed('w1');
        await store.runs.update(r.id, { lease: null });
        expect(await store.claims.claim('w2', LEASE, T0 + 100 * LEASE, CLAIM_POLICY)).toBeUndefined();
      });

      it('claims a given run when asked for it by id, and nothing else', async () => {
        await run(undefined, { createdAt: T0 });
        const wanted = await run(undefined, { createdAt: T0 + 5 });
        const c = await store.claims.claim('w1', LEASE, T0 + 10, CLAIM_POLICY, { runId: wanted.id });
        expect(c!.run.id).toBe(wanted.id);
        expect(await store.claims.claim('w1', LEASE, T0 + 10, CLAIM_POLICY, { runId: wanted.id })).toBeUndefined();
        expect(await store.claims.claim('w1', LEASE, T0 + 10, CLAIM_POLICY, { runId: 'nope' })).toBeUndefined();
      });

      it('inside a transaction that rolls back, the claim is undone', async () => {
        const r = await run();
        await rejection(
          store.transaction(async (tx) => {
            expect((await tx.claims.claim('w1', LEASE, T0, CLAIM_POLICY))!.run.id).toBe(r.id);
            throw new Error('boom');
          }),
        );
        expect(await store.runs.get(r.id)).toEqual(r);
      });
    });

    describe('claims.renewLease', () => {
      it('extends the lease only for the current owner with the current token', async () => {
        const r = await claimed('w1');
        expect(await store.claims.renewLease(r.id, 'w1', r.fencingToken, T0 + 2 * LEASE)).toBe(true);
        expect((await store.runs.get(r.id))!.lease).toEqual({ owner: 'w1', expiresAt: T0 + 2 * LEASE });

        expect(await store.claims.renewLease(r.id, 'w2', r.fencingToken, T0 + 3 * LEASE)).toBe(false);
        expect(await store.claims.renewLease(r.id, 'w1', r.fencingToken - 1, T0 + 3 * LEASE)).toBe(false);
        expect(await store.claims.renewLease(r.id, 'w1', r.fencingToken + 1, T0 + 3 * LEASE)).toBe(false);
        expect(await store.claims.renewLease('nope', 'w1', r.fencingToken, T0 + 3 * LEASE)).toBe(false);
        expect((await store.runs.get(r.id))!.lease).toEqual({ owner: 'w1', expiresAt: T0 + 2 * LEASE });
      });

      it('is refused once the run ended', async () => {
        const r = await claimed('w1');
        await store.runs.update(r.id, { status: 'completed', endedAt: T0 });
        expect(await store.claims.renewLease(r.id, 'w1', r.fencingToken, T0 + 2 * LEASE)).toBe(false);
      });
    });

    describe("a run's events", () => {
      it('are read from its first event on, only its own, in seq order, whatever came before it in the session', async () => {
        const sid = await session();
        await store.events.append(sid, [note(), note({ runId: 'an-earlier-run' }), note()]);
        const r = await run(sid);
        await store.events.append(sid, [
          note({ runId: r.id, data: { n: 1 } }),
          note(),
          note({ runId: r.id, data: { n: 2 } }),
        ]);
        await store.events.append(sid, [note({ runId: r.id, data: { n: 3 } })]);
        const mine = await store.events.read(sid, { runId: r.id });
        expect(mine.map((e) => [e.seq, (e.data as { n: number }).n])).toEqual([
          [4, 1],
          [6, 2],
          [7, 3],
        ]);
        expect((await store.events.read(sid, { runId: r.id, afterSeq: 4 })).map((e) => e.seq)).toEqual([6, 7]);
        expect((await store.events.read(sid, { runId: r.id, afterSeq: 4, untilSeq: 6 })).map((e) => e.seq)).toEqual([
          6,
        ]);
        expect((await store.events.read(sid, { runId: r.id, limit: 1 })).map((e) => e.seq)).toEqual([4]);
        // Another session's events, and a run that has none, give nothing.
        expect(await store.events.read(await session(), { runId: r.id })).toEqual([]);
        expect(await store.events.read(sid, { runId: (await run(await session())).id })).toEqual([]);
      });
    });

    describe('fenced append', () => {
      it('appends while the token is current; a stale token throws FencedError and writes nothing', async () => {
        const r = await claimed('w1');
        const [ok] = await store.events.append(r.sessionId, [note({ runId: r.id })], {
          fence: { runId: r.id, token: r.fencingToken },
        });
        expect(ok!.seq).toBe(1);

        await store.runs.update(r.id, { fence: true });
        const err = await rejection(
          store.events.append(r.sessionId, [note({ runId: r.id }), note({ runId: r.id })], {
            fence: { runId: r.id, token: r.fencingToken },
          }),
        );
        expect(err).toBeInstanceOf(FencedError);
        expect((err as FencedError).code).toBe('fenced');
        expect(await store.events.read(r.sessionId)).toEqual([ok]);
        expect((await store.sessions.get(r.sessionId))!.lastSeq).toBe(1);
      });

      it('a fence on an unknown run throws FencedError', async () => {
        const s = await session();
        expect(
          await rejection(store.events.append(s, [note()], { fence: { runId: 'nope', token: 0 } })),
        ).toBeInstanceOf(FencedError);
        expect(await store.events.read(s)).toEqual([]);
      });

      it('inside a transaction: the stale append writes nothing and the transaction rolls back if it rethrows', async () => {
        const r = await claimed('w1');
        const stale = r.fencingToken;
        await store.runs.update(r.id, { fence: true });
        const err = await rejection(
          store.transaction(async (tx) => {
            await tx.events.append(r.sessionId, [note()]);
            await tx.events.append(r.sessionId, [note({ runId: r.id })], { fence: { runId: r.id, token: stale } });
          }),
        );
        expect(err).toBeInstanceOf(FencedError);
        expect(await store.events.read(r.sessionId)).toEqual([]);
      });
    });

    describe('checkpoints', () => {
      it('puts, gets and replaces (upsert) the checkpoint of a run', async () => {
        const r = await run();
        expect(await store.runs.getCheckpoint(r.id)).toBeUndefined();
        await store.runs.putCheckpoint({ runId: r.id, step: 0, seq: 3, state: { conversation: [], n: 1 } });
        expect(await store.runs.getCheckpoint(r.id)).toEqual({
          runId: r.id,
          step: 0,
          seq: 3,
          state: { conversation: [], n: 1 },
        });
        await store.runs.putCheckpoint({ runId: r.id, step: 2, seq: 9, state: { conversation: [{ id: 'm' }], n: 2 } });
        expect(await store.runs.getCheckpoint(r.id)).toEqual({
          runId: r.id,
          step: 2,
          seq: 9,
          state: { conversation: [{ id: 'm' }], n: 2 },
        });
        const other = await run();
        expect(await store.runs.getCheckpoint(other.id)).toBeUndefined();
      });

      it('a checkpoint put in a transaction that rolls back is not kept', async () => {
        const r = await run();
        await store.runs.putCheckpoint({ runId: r.id, step: 1, seq: 1, state: 'one' });
        await rejection(
          store.transaction(async (tx) => {
            await tx.runs.putCheckpoint({ runId: r.id, step: 2, seq: 2, state: 'two' });
            throw new Error('boom');
          }),
        );
        expect(await store.runs.getCheckpoint(r.id)).toEqual({ runId: r.id, step: 1, seq: 1, state: 'one' });
      });
    });

    describe('inputs', () => {
      const input = (sessionId: string, overrides: Partial<RunInput> = {}): RunInput => ({
        id: randomUUID(),
        sessionId,
        kind: 'message',
        runId: null,
        payload: { text: 'hi' },
        createdAt: T0,
        ...overrides,
      });

      it('adds, lists oldest first without removing, and counts by kind', async () => {
        const s = await session();
        const r = await run(s);
        const m2 = input(s, { id: 'b', createdAt: T0 + 2, payload: { n: 2 } });
        const m1 = input(s, { id: 'z', createdAt: T0 + 1, payload: { n: 1, deep: [{ x: null }] } });
        const st = input(s, { id: 'st', kind: 'steer', runId: r.id, createdAt: T0 });
        for (const i of [m2, m1, st]) await store.inputs.add(i);

        expect(await store.inputs.list(s, 'message')).toEqual([m1, m2]);
        expect(await store.inputs.list(s, 'message', undefined, 1)).toEqual([m1]);
        expect(await store.inputs.list(s, 'steer')).toEqual([st]);
        expect(await store.inputs.list(s, 'steer', r.id)).toEqual([st]);
        expect(await store.inputs.list(s, 'steer', 'other-run')).toEqual([]);
        expect(await store.inputs.list(s, 'message', null)).toEqual([m1, m2]);
        expect(await store.inputs.list(s, 'steer', null)).toEqual([]);
        expect(await store.inputs.count(s, 'message')).toBe(2);
        expect(await store.inputs.count(s, 'steer')).toBe(1);
        // Listing removed nothing.
        expect(await store.inputs.list(s, 'message')).toEqual([m1, m2]);
        expect(await store.inputs.list(await session(), 'message')).toEqual([]);
      });

      it('takes (removes and returns) the oldest first, up to a limit', async () => {
        const s = await session();
        const all = [1, 2, 3].map((n) => input(s, { id: `m${n}`, createdAt: T0 + n, payload: { n } }));
        for (const i of [...all].reverse()) await store.inputs.add(i);
        expect(await store.inputs.take(s, 'message', undefined, 2)).toEqual([all[0], all[1]]);
        expect(await store.inputs.count(s, 'message')).toBe(1);
        expect(await store.inputs.take(s, 'message')).toEqual([all[2]]);
        expect(await store.inputs.take(s, 'message')).toEqual([]);
        expect(await store.inputs.count(s, 'message')).toBe(0);
      });

      it('takes only the inputs of the given run and kind', async () => {
        const s = await session();
        const r = await run(s);
        const mine = input(s, { kind: 'steer', runId: r.id });
        const others = input(s, { kind: 'steer', runId: 'another-run' });
        const message = input(s);
        for (const i of [mine, others, message]) await store.inputs.add(i);
        expect(await store.inputs.take(s, 'steer', r.id)).toEqual([mine]);
        expect(await store.inputs.list(s, 'steer')).toEqual([others]);
        expect(await store.inputs.list(s, 'message')).toEqual([message]);
      });

      it('unlessEnded: takes nothing while the run has a final status, in a transaction too', async () => {
        const s = await session();
        const r = await run(s);
        const first = input(s, { id: 'st1', kind: 'steer', runId: r.id, createdAt: T0 + 1 });
        await store.inputs.add(first);
        expect(await store.inputs.take(s, 'steer', r.id, undefined, { unlessEnded: true })).toEqual([first]);
        const second = input(s, { id: 'st2', kind: 'steer', runId: r.id, createdAt: T0 + 2 });
        await store.inputs.add(second);
        await store.runs.update(r.id, { status: 'completed' });
        expect(await store.inputs.take(s, 'steer', r.id, undefined, { unlessEnded: true })).toEqual([]);
        expect(
          await store.transaction((tx) => tx.inputs.take(s, 'steer', r.id, undefined, { unlessEnded: true })),
        ).toEqual([]);
        expect(await store.inputs.list(s, 'steer', r.id)).toEqual([second]);
        // Without it, an ended run's inputs are taken as any.
        expect(await store.inputs.take(s, 'steer', r.id)).toEqual([second]);
      });

      it('removes one input: true once, then false', async () => {
        const s = await session();
        const i = input(s);
        await store.inputs.add(i);
        expect(await store.inputs.remove(i.id)).toBe(true);
        expect(await store.inputs.remove(i.id)).toBe(false);
        expect(await store.inputs.count(s, 'message')).toBe(0);
      });

      it('a take inside a transaction that rolls back leaves the inputs in place', async () => {
        const s = await session();
        const i = input(s);
        await store.inputs.add(i);
        await rejection(
          store.transaction(async (tx) => {
            expect(await tx.inputs.take(s, 'message')).toEqual([i]);
            throw new Error('boom');
          }),
        );
        expect(await store.inputs.list(s, 'message')).toEqual([i]);
      });
    });
  });
}
