/**
 * The side-effect contract after a real crash (ADR-0018). A worker process starts a step that
 * calls an idempotent `reserve` and an effectful `charge` at once and is killed with SIGKILL
 * while both run (test/support/effects.ts); this process then recovers the run from the same
 * SQLite file with the policy under test. The side-effect ledger tells which executions happened
 * and with which idempotency key.
 */
import { rmSync } from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { Runtime, SqliteStore, StoredEvent } from '../../src/index.ts';
import { crashMidCall, effectsAgent, readLedger, runtimeFor, type EffectsAgentOptions } from '../support/effects.ts';

type Result = StoredEvent & {
  data: { toolCallId: string; output: { type: string; code?: string; message?: string; value?: unknown } };
};

let open: Array<{ rt: Runtime; store: SqliteStore; dir: string }> = [];
afterEach(async () => {
  for (const o of open) {
    await o.rt.close().catch(() => {});
    await o.store.close().catch(() => {});
    rmSync(o.dir, { recursive: true, force: true });
  }
  open = [];
});

/** Crashes a run mid-call, then recovers it here with `options`. */
async function crashAndRecover(options: Omit<EffectsAgentOptions, 'ledger'>) {
  const crash = await crashMidCall();
  const { rt, store } = runtimeFor(crash.db, effectsAgent({ ...options, ledger: crash.ledger }));
  open.push({ rt, store, dir: crash.dir });
  const before = readLedger(crash.ledger);
  rt.startWorker({ id: 'recoverer', concurrency: 1, pollMs: 20 });
  const events = async () => store.events.read(crash.sessionId);
  const resultOf = async (id: string) =>
    (await events()).filter(
      (e): e is Result => e.type === 'tool/result' && (e.data as { toolCallId: string }).toolCallId === id,
    );
  const resolutions = async () =>
    (await events())
      .filter((e) => e.type === 'tool/unknown-outcome')
      .map((e) => (e.data as { resolution: string }).resolution);
  return { ...crash, rt, store, before, events, resultOf, resolutions, ledgerNow: () => readLedger(crash.ledger) };
}

describe('effect classes after a SIGKILL', () => {
  it('each call keeps its idempotency key across the recovery; the idempotent call runs again with it; the effectful one is told to the model by default', async () => {
    const c = await crashAndRecover({});
    // The killed worker started both calls.
    expect(c.before.map((l) => l.tool).sort()).toEqual(['charge', 'reserve']);
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');

    const ledger = c.ledgerNow();
    const reserves = ledger.filter((l) => l.tool === 'reserve');
    expect(reserves).toHaveLength(2);
    expect(new Set(reserves.map((l) => l.pid)).size).toBe(2); // two processes
    expect(reserves[1]!.key).toBe(reserves[0]!.key); // the same key
    expect(reserves[0]!.runId).toBe(c.runId);
    // The effectful call never ran again.
    expect(ledger.filter((l) => l.tool === 'charge')).toHaveLength(1);

    const events = await c.events();
    const calls = events
      .filter((e) => e.type === 'tool/call')
      .map((e) => e.data as { toolCallId: string; idempotencyKey: string });
    // Each call is on record once, with the key both executions saw.
    expect(calls.map((x) => x.toolCallId).sort()).toEqual(['call-charge', 'call-reserve']);
    expect(calls.find((x) => x.toolCallId === 'call-reserve')!.idempotencyKey).toBe(reserves[0]!.key);
    expect(calls.find((x) => x.toolCallId === 'call-charge')!.idempotencyKey).toBe(
      ledger.find((l) => l.tool === 'charge')!.key,
    );

    expect((await c.resultOf('call-reserve'))[0]!.data.output).toMatchObject({
      type: 'json',
      value: { reserved: true, key: reserves[0]!.key },
    });
    expect((await c.resultOf('call-charge'))[0]!.data.output).toMatchObject({ type: 'error', code: 'outcome_unknown' });
    const outcome = events.find((e) => e.type === 'tool/unknown-outcome')!;
    expect(outcome.data).toMatchObject({
      toolCallId: 'call-charge',
      toolName: 'charge',
      resolution: 'told_model',
      idempotencyKey: calls.find((x) => x.toolCallId === 'call-charge')!.idempotencyKey,
    });
    expect(typeof (outcome.data as { startedAt?: number }).startedAt).toBe('number');
  });

  it('ask_human, approved: the run waits for an approval that shows what is known, then the call runs again with the same key', async () => {
    const c = await crashAndRecover({ onUnknownOutcome: 'ask_human' });
    const waiting = await c.rt.runs.wait(c.runId, { until: 'settled', timeoutMs: 20_000 });
    expect(waiting.status).toBe('waiting_approval');
    const key = c.before.find((l) => l.tool === 'charge')!.key;
    const calls = (
      waiting.waiting as unknown as {
        calls: Array<{
          toolCallId: string;
          kind: string;
          input: unknown;
          unknownOutcome?: { idempotencyKey: string; startedAt?: number };
        }>;
      }
    ).calls;
    expect(calls).toEqual([
      expect.objectContaining({
        toolCallId: 'call-charge',
        kind: 'approval',
        input: { amount: 42 },
        unknownOutcome: { idempotencyKey: key, startedAt: expect.any(Number) },
      }),
    ]);
    const approval = (await c.events()).find((e) => e.type === 'tool/approval')!;
    expect(approval.data).toMatchObject({ toolCallId: 'call-charge', unknownOutcome: { idempotencyKey: key } });
    // The idempotent call was re-run and its result recorded before the run waited.
    expect(await c.resultOf('call-reserve')).toHaveLength(1);

    await c.rt.runs.approve(c.runId, 'call-charge');
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    const charges = c.ledgerNow().filter((l) => l.tool === 'charge');
    expect(charges).toHaveLength(2);
    expect(charges[1]!.key).toBe(key);
    expect((await c.resultOf('call-charge')).map((r) => r.data.output)).toEqual([
      { type: 'json', value: { charged: true, key } },
    ]);
    expect(await c.resolutions()).toEqual(['asked_human', 'retried']);
    // Its call is on record once: the retry is the same call, with the same key.
    expect(
      (await c.events()).filter(
        (e) => e.type === 'tool/call' && (e.data as { toolCallId: string }).toolCallId === 'call-charge',
      ),
    ).toHaveLength(1);
  });

  it('ask_human, denied: the call does not run again and the model is told so', async () => {
    const c = await crashAndRecover({ onUnknownOutcome: 'ask_human' });
    const waiting = await c.rt.runs.wait(c.runId, { until: 'settled', timeoutMs: 20_000 });
    expect(waiting.status).toBe('waiting_approval');
    await c.rt.runs.deny(c.runId, 'call-charge', { reason: 'the bank shows the payment' });
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    expect(c.ledgerNow().filter((l) => l.tool === 'charge')).toHaveLength(1);
    const [result] = await c.resultOf('call-charge');
    expect(result!.data.output).toMatchObject({ type: 'error', code: 'denied' });
    expect(result!.data.output.message).toContain('not to run it again');
    expect(result!.data.output.message).toContain('the bank shows the payment');
    expect(await c.resolutions()).toEqual(['asked_human', 'not_retried']);
  });

  it('fail_run (the tool overriding the agent): the run fails with an error naming the call', async () => {
    const c = await crashAndRecover({ onUnknownOutcome: 'tell_model', chargePolicy: 'fail_run' });
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('failed');
    expect(JSON.stringify(done.error)).toContain('call-charge');
    expect(JSON.stringify(done.error)).toContain('fail_run');
    expect(c.ledgerNow().filter((l) => l.tool === 'charge')).toHaveLength(1);
    expect(await c.resultOf('call-charge')).toHaveLength(0);
    expect(await c.resolutions()).toEqual(['failed']);
  });

  it('check says done: its output is the result, and the call does not run again', async () => {
    const seen: string[] = [];
    const c = await crashAndRecover({
      onUnknownOutcome: 'fail_run',
      check: (input, ctx) => {
        seen.push(ctx.idempotencyKey);
        return { done: true, output: { charged: true, found: 'by key', amount: input.amount } };
      },
    });
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    const key = c.before.find((l) => l.tool === 'charge')!.key;
    expect(seen).toEqual([key]);
    expect(c.ledgerNow().filter((l) => l.tool === 'charge')).toHaveLength(1);
    expect((await c.resultOf('call-charge')).map((r) => r.data.output)).toEqual([
      { type: 'json', value: { charged: true, found: 'by key', amount: 42 } },
    ]);
    expect(await c.resolutions()).toEqual(['checked_done']);
  });

  it('check says not done: the call runs again with the same key', async () => {
    const c = await crashAndRecover({ onUnknownOutcome: 'fail_run', check: () => ({ done: false }) });
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    const charges = c.ledgerNow().filter((l) => l.tool === 'charge');
    expect(charges).toHaveLength(2);
    expect(charges[1]!.key).toBe(charges[0]!.key);
    expect((await c.resultOf('call-charge')).map((r) => r.data.output)).toEqual([
      { type: 'json', value: { charged: true, key: charges[0]!.key } },
    ]);
    expect(await c.resolutions()).toEqual(['checked_not_done']);
  });

  it('a check that throws (or cannot tell) falls back to the policy', async () => {
    const c = await crashAndRecover({
      check: () => {
        throw new Error('payment API down');
      },
    });
    const done = await c.rt.runs.wait(c.runId, { until: 'terminal', timeoutMs: 20_000 });
    expect(done.status).toBe('completed');
    expect(c.ledgerNow().filter((l) => l.tool === 'charge')).toHaveLength(1);
    expect((await c.resultOf('call-charge'))[0]!.data.output).toMatchObject({ type: 'error', code: 'outcome_unknown' });
    expect(await c.resolutions()).toEqual(['told_model']);
  });
});
