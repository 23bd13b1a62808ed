/**
 * The tenants registry is the runtime's source of quotas when it is given none of its own
 * (ADR-0043): a tenant's quotas set with `rt.tenants.put` (or `keel tenants set`, `PUT
 * /v1/tenants/{id}`) and an API key's own hold without any `quotas` option; a tenant's own quotas
 * override the runtime's default field by field; with no quota anywhere, nothing is reserved.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import {
  createRuntime,
  defineAgent,
  tool,
  manualClock,
  QuotaExceededError,
  ScriptedModel,
  type Runtime,
  type Store,
  type TenantQuotas,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';

const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

const NOON = Date.UTC(2026, 11, 5, 12);
const PER_CALL = 51;

const lookup = tool({
  name: 'lookup',
  description: 'Looks something up',
  input: z.object({}),
  execute: () => 'found',
});

const danger = tool({
  name: 'danger',
  description: 'Needs approval',
  input: z.object({}),
  approval: 'always',
  execute: () => 'done',
});

async function setup(backend: 'sqlite' | 'postgres', defaults?: TenantQuotas) {
  const { store, close } = await openBackendStore(backend);
  const rt = createRuntime({
    store,
    clock: manualClock(NOON),
    agents: [
      defineAgent({
        name: 'a',
        model: new ScriptedModel([{ text: 'done', usage: { input: 1, output: 50 } }], { loop: true }),
        settings: { maxOutputTokens: 50 },
      }),
      defineAgent({
        name: 'careful',
        model: new ScriptedModel([
          { toolCalls: [{ id: 'c1', name: 'danger', input: {} }], usage: { input: 1, output: 50 } },
          { text: 'done', usage: { input: 1, output: 50 } },
        ]),
        settings: { maxOutputTokens: 50 },
        tools: [danger],
      }),
      defineAgent({
        name: 'steps',
        model: new ScriptedModel([
          { toolCalls: [{ id: 't1', name: 'lookup', input: {} }], usage: { input: 1, output: 50 } },
          { toolCalls: [{ id: 't2', name: 'lookup', input: {} }], usage: { input: 1, output: 50 } },
          { text: 'done', usage: { input: 1, output: 50 } },
        ]),
        settings: { maxOutputTokens: 50 },
        tools: [lookup],
      }),
    ],
    ...(defaults ? { quotas: { default: defaults } } : {}),
  });
  rt.startWorker({ pollMs: 5, sweepMs: 20, concurrency: 4 });
  cleanups.push(async () => {
    await rt.close({ graceMs: 100 });
    await close();
  });
  return { rt, store };
}

async function runOnce(rt: Runtime, tenant: string) {
  const s = await rt.sessions.create({ tenant });
  const { run } = await rt.sessions.send(s.id, 'go');
  return rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
}

const ledgerRows = async (store: Store, tenant: string) =>
  (await store.quotas.usage(`tenant:${tenant}`, Date.UTC(2026, 11, 5), Date.UTC(2026, 11, 1))).tokensDay.used;

describe.each(['sqlite', 'postgres'] as const)('quotas from the tenants registry (%s)', (backend) => {
  it("a tenant's quotas in the registry hold with no quotas option; other tenants are not limited", async () => {
    const { rt } = await setup(backend);
    // Nothing set anywhere: runs are not charged.
    expect((await runOnce(rt, 'acme')).status).toBe('completed');
    expect((await rt.runs.quota('acme')).tenant).toBeNull();

    await rt.tenants.put({ id: 'acme', quotas: { tokensPerDay: PER_CALL, onLimit: 'fail' } });
    expect((await runOnce(rt, 'acme')).status).toBe('completed');
    const refused = await runOnce(rt, 'acme');
    expect(refused.status).toBe('failed');
    expect(refused.error).toMatchObject({ kind: 'quota_exceeded', scope: 'tenant:acme', limit: 'tokensPerDay' });
    expect((await rt.runs.quota('acme')).tenant).toMatchObject({
      scope: 'tenant:acme',
      on_limit: 'fail',
      tokens_per_day: { limit: PER_CALL, used: PER_CALL, reserved: 0 },
    });
    expect((await runOnce(rt, 'globex')).status).toBe('completed');

    // Runs per minute from the registry refuse a send.
    await rt.tenants.put({ id: 'initech', quotas: { runsPerMinute: 1 } });
    expect((await runOnce(rt, 'initech')).status).toBe('completed');
    const s = await rt.sessions.create({ tenant: 'initech' });
    await expect(rt.sessions.send(s.id, 'go')).rejects.toBeInstanceOf(QuotaExceededError);

    // Removing the tenant's row lifts its quotas.
    await rt.tenants.delete('acme');
    expect((await runOnce(rt, 'acme')).status).toBe('completed');
  }, 30_000);

  it("a tenant's own quotas override the runtime's default field by field", async () => {
    const { rt, store } = await setup(backend, { tokensPerDay: 1_000_000, onLimit: 'fail' });
    await rt.tenants.put({ id: 'acme', quotas: { tokensPerDay: PER_CALL } });
    expect((await runOnce(rt, 'acme')).status).toBe('completed');
    // The default's `fail` policy still applies to acme's own token quota.
    expect((await runOnce(rt, 'acme')).error).toMatchObject({ kind: 'quota_exceeded', scope: 'tenant:acme' });
    // Another tenant has the default's.
    expect((await runOnce(rt, 'globex')).status).toBe('completed');
    expect(await ledgerRows(store, 'globex')).toBe(PER_CALL);
  }, 30_000);

  it('a run that waits for an approval between its calls leaves nothing reserved: every call settled once', async () => {
    const { rt } = await setup(backend);
    await rt.tenants.put({ id: 'acme', quotas: { tokensPerDay: 1_000_000 } });
    const s = await rt.sessions.create({ tenant: 'acme' });
    const { run } = await rt.sessions.send(s.id, 'go', { agent: 'careful' });
    expect((await rt.runs.wait(run.id)).status).toBe('waiting_approval');
    await rt.runs.approve(run.id, 'c1');
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect((await rt.runs.quota('acme')).tenant?.tokens_per_day).toMatchObject({ used: 2 * PER_CALL, reserved: 0 });
  }, 30_000);

  it('a run of several steps settles each call at its step: nothing stays reserved', async () => {
    const { rt } = await setup(backend);
    await rt.tenants.put({ id: 'acme', quotas: { tokensPerDay: 1_000_000 } });
    const s = await rt.sessions.create({ tenant: 'acme' });
    const { run } = await rt.sessions.send(s.id, 'go', { agent: 'steps' });
    expect((await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect((await rt.runs.quota('acme')).tenant?.tokens_per_day).toMatchObject({ used: 3 * PER_CALL, reserved: 0 });
  }, 30_000);
});
