/**
 * The tenants part of the storage contract: the registry (`store.tenants`), API key scopes and
 * quotas, and fair dispatch (which tenant's run a claim takes, store/fair-dispatch.ts). Every
 * backend passes it; `another()`, when there is one, races claims between two instances.
 */
import { randomUUID } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { CLAIM_POLICY } from '../../src/runs/lifecycle/run-status.ts';
import type { ApiKeyRecord, RunRecord, Store } from '../../src/store/index.ts';
import type { OpenedStore } from './contract.ts';

const T0 = 1_700_000_000_000;
const LEASE = 30_000;

export function tenantsContract(name: string, open: () => Promise<OpenedStore>): void {
  describe(`tenants contract: ${name}`, () => {
    let opened: OpenedStore;
    let store: Store;

    beforeEach(async () => {
      opened = await open();
      store = opened.store;
    });

    afterEach(async () => {
      await opened.cleanup();
    });

    let clock = T0;
    /** A queued run of `tenant` (in a session of its own), created after every run before it. */
    const run = async (tenant: string): Promise<RunRecord> => {
      const sessionId = randomUUID();
      await store.sessions.create({ id: sessionId, tenant, createdAt: T0 });
      return store.runs.create({
        id: randomUUID(),
        sessionId,
        agent: { name: 'agent', version: '1' },
        agentSpec: { model: 'scripted' },
        createdAt: ++clock,
      });
    };
    const runs = async (tenant: string, n: number) => {
      const out: RunRecord[] = [];
      for (let i = 0; i < n; i++) out.push(await run(tenant));
      return out;
    };
    /** The tenants of the next `n` claims (each claimed run is left running). */
    const claimTenants = async (n: number, s: Store = store): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        const c = await s.claims.claim('w', LEASE, T0 + 1000, CLAIM_POLICY);
        if (!c) break;
        out.push((await s.sessions.get(c.run.sessionId))!.tenant);
      }
      return out;
    };

    describe('tenants registry', () => {
      it('creates a tenant with the defaults, updates only what is given, lists and deletes', async () => {
        expect(await store.tenants.get('acme')).toBeUndefined();
        expect(await store.tenants.list()).toEqual([]);
        const created = await store.tenants.put({ id: 'acme' }, T0);
        expect(created).toEqual({ id: 'acme', name: null, weight: 1, quotas: {}, createdAt: T0, updatedAt: T0 });
        const named = await store.tenants.put({ id: 'acme', name: 'Acme Inc.', weight: 3 }, T0 + 1);
        expect(named).toEqual({ ...created, name: 'Acme Inc.', weight: 3, updatedAt: T0 + 1 });
        const quotas = { concurrentRuns: 5, costPerDay: 12.5, onLimit: 'fail' as const };
        const limited = await store.tenants.put({ id: 'acme', quotas }, T0 + 2);
        expect(limited).toEqual({ ...named, quotas, updatedAt: T0 + 2 });
        // null clears the name; an absent field keeps its value.
        expect(await store.tenants.put({ id: 'acme', name: null }, T0 + 3)).toEqual({
          ...limited,
          name: null,
          updatedAt: T0 + 3,
        });
        await store.tenants.put({ id: 'beta', weight: 2 }, T0 + 4);
        expect(await store.tenants.get('acme')).toMatchObject({ weight: 3, quotas });
        expect((await store.tenants.list()).map((t) => [t.id, t.weight])).toEqual([
          ['acme', 3],
          ['beta', 2],
        ]);
        expect(await store.tenants.delete('acme')).toBe(true);
        expect(await store.tenants.delete('acme')).toBe(false);
        expect(await store.tenants.get('acme')).toBeUndefined();
        expect((await store.tenants.list()).map((t) => t.id)).toEqual(['beta']);
      });

      it('refuses a bad id, weight or quota with a validation error naming it, and writes nothing', async () => {
        const bad: Array<[Parameters<Store['tenants']['put']>[0], RegExp]> = [
          [{ id: '' }, /tenant id/],
          [{ id: 'a b' }, /tenant id/],
          [{ id: 'x'.repeat(65) }, /tenant id/],
          [{ id: 'acme', weight: 0 }, /weight/],
          [{ id: 'acme', weight: 1.5 }, /weight/],
          [{ id: 'acme', weight: 10_001 }, /weight/],
          [{ id: 'acme', quotas: { concurrentRuns: -1 } }, /concurrentRuns/],
          [{ id: 'acme', quotas: { concurrentRuns: 2.5 } }, /concurrentRuns/],
          [{ id: 'acme', quotas: { costPerDay: Number.NaN } }, /costPerDay/],
          [{ id: 'acme', quotas: { bogus: 1 } as never }, /no limit "bogus"/],
          [{ id: 'acme', quotas: { onLimit: 'drop' } as never }, /onLimit/],
          [{ id: 'acme', quotas: [] as never }, /quotas must be an object/],
        ];
        for (const [update, message] of bad)
          await expect(store.tenants.put(update, T0)).rejects.toMatchObject({ code: 'validation', message });
        expect(await store.tenants.list()).toEqual([]);
      });
    });

    describe('API key scopes and quotas', () => {
      const key = (over: Partial<ApiKeyRecord>): ApiKeyRecord => ({
        id: randomUUID(),
        tenant: 'acme',
        name: null,
        hash: randomUUID(),
        prefix: 'keel_x',
        ratePerMinute: null,
        createdAt: T0,
        revokedAt: null,
        scope: 'tenant',
        quotas: null,
        ...over,
      });

      it('keeps a key scope and its own quotas', async () => {
        const admin = key({ scope: 'admin', tenant: 'ops' });
        const limited = key({ quotas: { runsPerMinute: 10, onLimit: 'wait' } });
        await store.keys.create(admin);
        await store.keys.create(limited);
        expect(await store.keys.find(admin.hash)).toEqual(admin);
        expect(await store.keys.find(limited.hash)).toEqual(limited);
      });

      it('refuses an unknown scope or bad quotas', async () => {
        await expect(store.keys.create(key({ scope: 'root' as never }))).rejects.toMatchObject({
          code: 'validation',
          message: /scope/,
        });
        await expect(store.keys.create(key({ quotas: { tokensPerDay: -5 } }))).rejects.toMatchObject({
          code: 'validation',
          message: /tokensPerDay/,
        });
        expect(await store.keys.list()).toEqual([]);
      });
    });

    describe('fair dispatch', () => {
      it("a tenant behind another's backlog is served at the next claim", async () => {
        await runs('a', 30);
        const b = await run('b');
        const [first, second] = await claimTenants(2);
        expect(first).toBe('a'); // a's oldest run is the oldest: equal service, oldest first
        expect(second).toBe('b');
        expect((await store.runs.get(b.id))!.status).toBe('running');
      });

      it('takes runs of one tenant in arrival order', async () => {
        const a = await runs('a', 4);
        const claimed: string[] = [];
        for (let i = 0; i < 4; i++)
          claimed.push((await store.claims.claim('w', LEASE, T0 + 1000, CLAIM_POLICY))!.run.id);
        expect(claimed).toEqual(a.map((r) => r.id));
        expect(await store.claims.claim('w', LEASE, T0 + 1000, CLAIM_POLICY)).toBeUndefined();
      });

      it('serves busy tenants in turn, by weight', async () => {
        await store.tenants.put({ id: 'heavy', weight: 3 }, T0);
        await runs('heavy', 20);
        await runs('light', 20);
        await runs('plain', 20);
        const served = await claimTenants(25);
        const count = (t: string) => served.filter((x) => x === t).length;
        // 5 rounds of 3 + 1 + 1 claims.
        expect([count('heavy'), count('light'), count('plain')]).toEqual([15, 5, 5]);
        // Never more than 3 heavy claims in a row, never two light ones without a heavy between.
        expect(served.join(',')).not.toMatch(/(heavy,){4}/);
        expect(served.join(',')).not.toMatch(/light,(plain,)*light/);
      });

      it('a tenant that was idle gets no credit for it: it shares from the next claim, no more', async () => {
        await runs('a', 10);
        expect(await claimTenants(6)).toEqual(Array(6).fill('a'));
        await runs('b', 10);
        expect(await claimTenants(6)).toEqual(['b', 'a', 'b', 'a', 'b', 'a']);
      });

      it('takes a run whose lease expired first, and charges nobody for it', async () => {
        await runs('a', 3);
        await runs('b', 3);
        const first = (await store.claims.claim('w1', LEASE, T0, CLAIM_POLICY))!.run;
        // First lease over: its run is recovered before any queued run, by either tenant.
        const recovered = await store.claims.claim('w2', LEASE, T0 + LEASE + 1, CLAIM_POLICY);
        expect(recovered).toMatchObject({ previous: 'running', run: { id: first.id, attempt: 2 } });
        // a was charged once (its first claim), b never: b is next, then they alternate.
        expect(await claimTenants(4)).toEqual(['b', 'a', 'b', 'a']);
      });

      it('a claim of a named run charges its tenant: the fast path does not bypass fairness', async () => {
        const a = await runs('a', 4);
        await runs('b', 4);
        for (const r of a.slice(0, 3)) await store.claims.claim('w', LEASE, T0 + 1000, CLAIM_POLICY, { runId: r.id });
        // a had 3 claims, b none: b is served until it caught up.
        expect(await claimTenants(4)).toEqual(['b', 'b', 'b', 'a']);
      });

      it('never claims one run twice when claims race (across instances when the backend has them)', async () => {
        const other = opened.another ? await opened.another() : store;
        const all = [...(await runs('a', 12)), ...(await runs('b', 6)), ...(await runs('c', 2))];
        const results = await Promise.all(
          Array.from({ length: 24 }, (_, i) =>
            (i % 2 ? other : store).claims.claim(`w${i}`, LEASE, T0 + 1000, CLAIM_POLICY),
          ),
        );
        const ids = results.flatMap((r) => (r ? [r.run.id] : []));
        expect(new Set(ids).size).toBe(ids.length);
        expect(ids.sort()).toEqual(all.map((r) => r.id).sort());
      });
    });
  });
}
