/**
 * The API shows a call whose outcome a crash left unknown (ADR-0018): the run's pending approval
 * says what is known (idempotency key, start time), and its steps mark the call as outcome unknown
 * with how that was resolved. The crash is real (SIGKILL of a worker process, test/support/effects.ts).
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { createApp } from '../../src/server/app.ts';
import type { Runtime, SqliteStore } from '../../src/index.ts';
import { crashMidCall, effectsAgent, readLedger, runtimeFor, type EffectsAgentOptions } from '../support/effects.ts';

let open: Array<{ rt: Runtime; store: SqliteStore; dir: string; close: () => void }> = [];
afterEach(async () => {
  for (const o of open) {
    o.close();
    await o.rt.close().catch(() => {});
    await o.store.close().catch(() => {});
    rmSync(o.dir, { recursive: true, force: true });
  }
  open = [];
});

async function recoveredApi(options: Omit<EffectsAgentOptions, 'ledger'>) {
  const crash = await crashMidCall();
  const { rt, store } = runtimeFor(crash.db, effectsAgent({ ...options, ledger: crash.ledger }));
  const { app, close } = createApp({ runtime: rt, auth: 'off', version: '0.0.0-test' });
  open.push({ rt, store, dir: crash.dir, close });
  rt.startWorker({ id: 'api-recoverer', concurrency: 1, pollMs: 20 });
  const get = async (path: string) => {
    const r = await app.request(path);
    expect(r.status).toBe(200);
    return (await r.json()) as Record<string, unknown> & { data?: Array<{ tools: Array<Record<string, unknown>> }> };
  };
  const post = async (path: string, body: unknown) =>
    app.request(path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  const charge = async () =>
    (await get(`/v1/runs/${crash.runId}/steps`))
      .data!.flatMap((s) => s.tools)
      .find((t) => t.toolCallId === 'call-charge')!;
  return { ...crash, rt, get, post, charge };
}

describe('API: outcome unknown', () => {
  it('a run waiting for a person shows what is known; its steps show the call as outcome unknown, then retried', async () => {
    const c = await recoveredApi({ onUnknownOutcome: 'ask_human' });
    await c.rt.runs.wait(c.runId, { until: 'settled', timeoutMs: 20_000 });
    const key = readLedger(c.ledger).find((l) => l.tool === 'charge')!.key;

    const run = (await c.get(`/v1/runs/${c.runId}`)) as {
      status: string;
      waiting: { requests: Array<Record<string, unknown>> };
    };
    expect(run.status).toBe('waiting_approval');
    expect(run.waiting.requests).toEqual([
      expect.objectContaining({
        approval_id: 'call-charge',
        tool: 'charge',
        arguments: { amount: 42 },
        kind: 'approval',
        outcome_unknown: { idempotency_key: key, started_at: expect.stringMatching(/^\d{4}-/) },
      }),
    ]);
    expect(await c.charge()).toMatchObject({
      toolName: 'charge',
      idempotencyKey: key,
      approval: 'pending',
      outcomeUnknown: { resolution: 'asked_human', startedAt: expect.any(Number) },
    });
    // The steps route shows the call once (the approval asked after the crash is about the same call).
    const tools = (await c.get(`/v1/runs/${c.runId}/steps`)).data!.flatMap((s) => s.tools);
    expect(tools.filter((t) => t.toolCallId === 'call-charge')).toHaveLength(1);
    expect(tools.find((t) => t.toolCallId === 'call-reserve')!.outcomeUnknown).toBeUndefined();

    const approved = await c.post(`/v1/runs/${c.runId}/approvals/call-charge`, { decision: 'approve' });
    expect(approved.status).toBe(200);
    expect((await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
    expect(await c.charge()).toMatchObject({
      approval: 'approved',
      outcomeUnknown: { resolution: 'retried' },
      output: { type: 'json', value: { charged: true, key } },
    });
  });

  it('edited arguments on an unknown-outcome approval are refused with a 400 naming why; nothing is decided, and the run can still be approved', async () => {
    const c = await recoveredApi({ onUnknownOutcome: 'ask_human' });
    expect((await c.rt.runs.wait(c.runId, { until: 'settled', timeoutMs: 20_000 })).status).toBe('waiting_approval');
    const key = readLedger(c.ledger).find((l) => l.tool === 'charge')!.key;

    const refused = await c.post(`/v1/runs/${c.runId}/approvals/call-charge`, {
      decision: 'approve',
      arguments: { amount: 1 },
    });
    expect(refused.status).toBe(400);
    expect(refused.headers.get('content-type')).toMatch(/^application\/problem\+json/);
    const problem = (await refused.json()) as Record<string, unknown>;
    expect(problem).toMatchObject({
      type: 'https://keel.dev/problems/arguments_not_editable',
      title: "This call's arguments cannot be edited",
      status: 400,
      instance: `/v1/runs/${c.runId}/approvals/call-charge`,
      run_id: c.runId,
      approval_id: 'call-charge',
    });
    expect(problem.detail).toMatch(
      /outcome is unknown: approving it runs the call again with its recorded arguments and idempotency key, so they cannot be edited/,
    );
    // Nothing was decided: the run still waits, and the library refuses the same way.
    const run = (await c.get(`/v1/runs/${c.runId}`)) as {
      status: string;
      waiting: { requests: Array<{ decided: boolean }> };
    };
    expect(run.status).toBe('waiting_approval');
    expect(run.waiting.requests[0]!.decided).toBe(false);
    await expect(c.rt.runs.approve(c.runId, 'call-charge', { input: { amount: 1 } })).rejects.toMatchObject({
      code: 'arguments_not_editable',
    });

    // Approved without arguments: the call runs again as it ran, with its input and key.
    expect((await c.post(`/v1/runs/${c.runId}/approvals/call-charge`, { decision: 'approve' })).status).toBe(200);
    expect((await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
    expect(await c.charge()).toMatchObject({
      input: { amount: 42 },
      approval: 'approved',
      output: { type: 'json', value: { charged: true, key } },
    });
  });

  it('the default policy: the steps show the call as outcome unknown, told to the model', async () => {
    const c = await recoveredApi({});
    expect((await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 })).status).toBe('completed');
    expect(await c.charge()).toMatchObject({
      outcomeUnknown: { resolution: 'told_model' },
      output: { type: 'error', code: 'outcome_unknown' },
    });
  });
});
