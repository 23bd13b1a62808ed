/**
 * The waiting model over HTTP (ADR-0015), through a real server: the run's `waiting` with its
 * deadline (`expires_at`), sleeping runs, `POST /v1/runs/{id}/signals/{name}` (payload checked
 * against the tool's schema, delivered once) and callback URLs that need no API key.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { LanguageModelV4CallOptions } from '@ai-sdk/provider';
import { afterEach, describe, expect, it } from 'vitest';
import { z } from 'zod';
import { callbackFor, defineAgent, ScriptedModel, sleepTool, tool, waitForSignal } from '../../src/index.ts';
import type { ScriptedResponse } from '../../src/model/index.ts';
import { createApiKey } from '../../src/server/auth.ts';
import { startServer, type RunningServer } from '../../src/server/serve.ts';
import { openSqliteStore } from '../../src/store/sqlite/index.ts';
import { Api } from '../support/server-helpers.ts';

const HOUR = 3600_000;
const cleanups: Array<() => Promise<void> | void> = [];
afterEach(async () => {
  for (const c of cleanups.splice(0).reverse()) await c();
});

/** The last user message decides: `sleep`, `ci` (a signal wait with a callback URL), `danger` (an approval with a deadline). */
function script(call: LanguageModelV4CallOptions): ScriptedResponse {
  const last = call.prompt.at(-1);
  if (last?.role === 'tool') return { text: 'done' };
  const text = last?.role === 'user' ? last.content.map((p) => (p.type === 'text' ? p.text : '')).join('') : '';
  if (text === 'sleep') return { toolCalls: [{ name: 'sleep', input: { seconds: 3600, reason: 'report due' } }] };
  if (text === 'ci') return { toolCalls: [{ name: 'await_ci', input: {} }] };
  if (text === 'danger') return { toolCalls: [{ name: 'danger', input: {} }] };
  return { text: `echo: ${text}` };
}

async function start(): Promise<{ api: Api; anonymous: Api; tokens: string[]; server: RunningServer }> {
  const dir = mkdtempSync(join(tmpdir(), 'keel-waits-api-'));
  const store = openSqliteStore({ path: join(dir, 'keel.db') });
  const { secret } = await createApiKey(store, { tenant: 't1' });
  const tokens: string[] = [];
  const awaitCi = tool({
    name: 'await_ci',
    description: 'Waits for CI',
    input: z.object({}),
    execute: async () => {
      // The tool hands the callback URL to the third party (here: the test).
      tokens.push((await callbackFor('ci')).token);
      return waitForSignal('ci', { schema: z.object({ ok: z.boolean() }) });
    },
  });
  const danger = tool({
    name: 'danger',
    description: 'Needs approval',
    input: z.object({}),
    approval: 'always',
    wait: { timeoutMs: HOUR, onTimeout: { deny: 'too late' } },
    execute: () => 'done',
  });
  const agent = defineAgent({
    name: 'waiter',
    model: new ScriptedModel([script], { loop: true }),
    tools: [sleepTool(), awaitCi, danger],
  });
  const server = await startServer({
    store,
    config: { source: null, agents: [agent], demo: false } as never,
    port: 0,
    host: '127.0.0.1',
    workers: 2,
    version: '0.0.0-test',
  });
  cleanups.push(async () => {
    await server.close({ graceMs: 200 });
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  });
  return { api: new Api(server.url, secret), anonymous: new Api(server.url), tokens, server };
}

function expectProblem(
  r: { status: number; headers: Headers; body: { type?: string } },
  type: string,
  status: number,
): void {
  expect(r.status).toBe(status);
  expect(r.headers.get('content-type')).toMatch(/^application\/problem\+json/);
  expect(r.body.type).toBe(`https://keel.dev/problems/${type}`);
}

describe('waits over HTTP', () => {
  it('a signal: the run shows what it waits for; a payload that breaks the schema is a 400; the first delivery resumes it; a second is a 409', async () => {
    const { api, anonymous } = await start();
    const s = await api.session();
    const { run } = await api.send(s.id, 'ci');
    const waiting = await api.waitForRun(run.id, 'waiting_for_signal');
    expect(waiting.lease).toBeNull();
    expect(waiting.waiting).toMatchObject({
      kind: 'signal',
      expires_at: null,
      requests: [{ kind: 'signal', tool: 'await_ci', signal: 'ci', decided: false, schema: { type: 'object' } }],
    });

    expectProblem(await anonymous.post(`/v1/runs/${run.id}/signals/ci`, { ok: true }), 'unauthorized', 401);
    expectProblem(await api.post(`/v1/runs/${run.id}/signals/ci`, { ok: 'yes' }), 'validation', 400);
    expectProblem(
      await api.request('POST', `/v1/runs/${run.id}/signals/ci`, {
        body: '{"ok":',
        headers: { 'content-type': 'application/json' },
      }),
      'bad_json',
      400,
    );
    const delivered = await api.post(`/v1/runs/${run.id}/signals/ci`, { ok: true });
    expect(delivered.status).toBe(200);
    expect(delivered.body).toMatchObject({ signal: 'ci', consumed: true, run: { id: run.id, status: 'queued' } });
    expectProblem(await api.post(`/v1/runs/${run.id}/signals/ci`, { ok: true }), 'already_delivered', 409);
    const done = await api.waitForRun(run.id, 'completed');
    expect(done.waiting).toBeNull();
    const events = await api.allEvents(s.id);
    expect(
      events.filter((e: { type: string }) => e.type === 'wait/resolved').map((e: { data: unknown }) => e.data),
    ).toEqual([
      {
        toolCallId: expect.any(String),
        kind: 'signal',
        by: 'signal',
        name: 'ci',
        output: { type: 'json', value: { ok: true } },
      },
    ]);
    // A signal for a run that ended is refused; one for a run of nobody is not found.
    expectProblem(await api.post(`/v1/runs/${run.id}/signals/other`, {}), 'illegal_transition', 409);
    expectProblem(await api.post('/v1/runs/no-such-run/signals/ci', {}), 'not_found', 404);
  });

  it('a callback URL: no API key, the token alone; an unknown token is a 404; a reused one a 409', async () => {
    const { api, anonymous, tokens } = await start();
    const s = await api.session();
    const { run } = await api.send(s.id, 'ci');
    await api.waitForRun(run.id, 'waiting_for_signal');
    expect(tokens).toHaveLength(1);
    expect(Buffer.from(tokens[0]!, 'base64url').length).toBeGreaterThanOrEqual(32);
    expectProblem(await anonymous.post(`/v1/callbacks/${'x'.repeat(43)}`, { ok: true }), 'not_found', 404);
    expectProblem(await anonymous.post(`/v1/callbacks/${tokens[0]}`, { ok: 1 }), 'validation', 400);
    const r = await anonymous.post(`/v1/callbacks/${tokens[0]}`, { ok: false });
    expect(r.status).toBe(200);
    expect(r.body).toEqual({ signal: 'ci', consumed: true });
    expectProblem(await anonymous.post(`/v1/callbacks/${tokens[0]}`, { ok: false }), 'already_delivered', 409);
    await api.waitForRun(run.id, 'completed');
    const events = await api.allEvents(s.id);
    expect(events.find((e: { type: string }) => e.type === 'wait/resolved').data).toMatchObject({
      by: 'callback',
      output: { type: 'json', value: { ok: false } },
    });
  });

  it('a sleeping run shows its wake-up as expires_at and can be cancelled; an approval shows its deadline', async () => {
    const { api } = await start();
    const s = await api.session();
    const before = Date.now();
    const { run } = await api.send(s.id, 'sleep');
    const asleep = await api.waitForRun(run.id, 'sleeping');
    expect(asleep.waiting).toMatchObject({
      kind: 'sleep',
      requests: [{ kind: 'sleep', tool: 'sleep', reason: 'report due', wake_on_steer: false, on_deadline: 'wake' }],
    });
    const wakeAt = Date.parse(asleep.waiting.expires_at);
    expect(wakeAt).toBeGreaterThanOrEqual(before + HOUR);
    expect(asleep.waiting.requests[0].until).toBe(asleep.waiting.expires_at);
    const cancelled = await api.post(`/v1/runs/${run.id}/cancel`);
    expect(cancelled.body.status).toBe('cancelled');

    const s2 = await api.session();
    const { run: r2 } = await api.send(s2.id, 'danger');
    const parked = await api.waitForRun(r2.id, 'waiting_approval');
    expect(Date.parse(parked.waiting.expires_at)).toBeGreaterThanOrEqual(before + HOUR);
    expect(parked.waiting.requests[0]).toMatchObject({ kind: 'approval', on_deadline: { deny: 'too late' } });
  });
});
