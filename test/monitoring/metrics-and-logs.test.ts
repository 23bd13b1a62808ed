import { Writable } from 'node:stream';
import { afterEach, describe, expect, it } from 'vitest';
import {
  createLogger,
  createRuntime,
  CLAIM_POLICY,
  defineAgent,
  instrumentRuntime,
  openSqliteStore,
  ScriptedModel,
  type Logger,
  type SqliteStore,
} from '../../src/index.ts';
import { startTestServer, type TestServer } from '../support/server-helpers.ts';

/** Prometheus text as `name{labels}` → value (labels as written). */
function parseMetrics(text: string): Map<string, number> {
  const out = new Map<string, number>();
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const i = line.lastIndexOf(' ');
    out.set(line.slice(0, i), Number(line.slice(i + 1)));
  }
  return out;
}

/** A stream that keeps what is written to it, line by line. */
function captured(): { stream: Writable; lines: string[] } {
  const lines: string[] = [];
  let rest = '';
  const stream = new Writable({
    write(chunk: Buffer, _enc, done) {
      const parts = (rest + chunk.toString()).split('\n');
      rest = parts.pop()!;
      lines.push(...parts);
      done();
    },
  });
  return { stream, lines };
}

describe('metrics and logs of a server', () => {
  let srv: TestServer | undefined;
  afterEach(async () => {
    await srv?.close();
    srv = undefined;
  });

  it('/metrics counts a run with a tool as it happened: claims, steps, model calls by model, tokens by agent and model, tools, commits, requests, SSE connections', async () => {
    srv = await startTestServer();
    const api = srv.api();
    const s = (await api.post('/v1/sessions', {})).body;
    // An SSE connection, open while the run goes.
    const ac = new AbortController();
    const stream = await fetch(`${srv.url}/v1/sessions/${s.id}/stream`, { signal: ac.signal });
    expect(stream.status).toBe(200);
    const sent = (await api.post(`/v1/sessions/${s.id}/messages`, { content: 'block:m1' })).body;
    await api.waitForRun(sent.run.id, 'running');
    let m = parseMetrics(String((await api.get('/metrics')).text));
    expect(m.get('keel_sse_connections')).toBe(1);
    srv.gates.open('m1');
    await api.waitForRun(sent.run.id, 'completed');
    ac.abort();
    await new Promise((r) => setTimeout(r, 100));

    m = parseMetrics(String((await api.get('/metrics')).text));
    expect(m.get('keel_runs{status="completed"}')).toBe(1);
    expect(m.get('keel_queue_depth')).toBe(0);
    expect(m.get('keel_run_claims_total{kind="start"}')).toBe(1);
    expect(m.get('keel_run_claim_latency_seconds_count')).toBe(1);
    expect(m.get('keel_run_duration_seconds_count{agent="helper",status="completed"}')).toBe(1);
    expect(m.get('keel_step_duration_seconds_count{agent="helper"}')).toBe(2);
    expect(m.get('keel_model_call_duration_seconds_count{model="helper-1"}')).toBe(2);
    expect(m.get('keel_model_time_to_first_token_seconds_count{model="helper-1"}')).toBe(2);
    // The scripted model reports 10 input and 5 output tokens a call.
    expect(m.get('keel_tokens_total{agent="helper",model="helper-1",type="input"}')).toBe(20);
    expect(m.get('keel_tokens_total{agent="helper",model="helper-1",type="output"}')).toBe(10);
    expect(m.get('keel_tool_call_duration_seconds_count{tool="gate"}')).toBe(1);
    expect(m.get('keel_store_commit_seconds_count')).toBeGreaterThan(3);
    expect(m.get('keel_events_committed_total')).toBeGreaterThan(8);
    expect(m.get('keel_http_requests_total{method="POST",route="/v1/sessions",status="201"}')).toBe(1);
    expect(m.get('keel_sse_connections')).toBe(0);
    expect(m.get('keel_sse_connections_total')).toBe(1);
    expect(m.get('keel_lease_expiries_total')).toBe(0);
  });

  it('logs JSON lines with the session and run of each (and the trace of a request), at the level asked', async () => {
    const out = captured();
    srv = await startTestServer({ logger: createLogger({ level: 'info', destination: out.stream }) });
    const api = srv.api();
    const s = (
      await api.post('/v1/sessions', {}, { traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' })
    ).body;
    // The run carries the trace of the request that created it: its lines name it.
    const sent = (
      await api.post(
        `/v1/sessions/${s.id}/messages`,
        { content: 'hello' },
        { traceparent: '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01' },
      )
    ).body;
    await api.waitForRun(sent.run.id, 'completed');
    await new Promise((r) => setTimeout(r, 50));
    const lines = out.lines.map((l) => JSON.parse(l) as Record<string, unknown>);
    const created = lines.find((l) => l.msg === 'request' && l.method === 'POST' && l.path === '/v1/sessions');
    expect(created).toMatchObject({ status: 201, trace_id: '0af7651916cd43dd8448eb211c80319c', level: 30 });
    const runLines = lines.filter((l) => l.run_id === sent.run.id);
    expect(runLines.map((l) => l.msg)).toEqual(expect.arrayContaining(['run started', 'turn ended', 'run completed']));
    for (const l of runLines)
      expect(l).toMatchObject({ session_id: s.id, trace_id: '4bf92f3577b34da6a3ce929d0e0e4736' });
    expect(runLines.find((l) => l.msg === 'turn ended')).toMatchObject({
      steps: 1,
      usage: { inputTokens: 10, outputTokens: 5 },
    });
  });

  it('a level above info keeps quiet lines out; a terminal gets readable lines instead of JSON', () => {
    const quiet = captured();
    const warnOnly: Logger = createLogger({ level: 'warn', destination: quiet.stream });
    warnOnly.info({ run_id: 'r' }, 'run started');
    warnOnly.warn({ run_id: 'r' }, 'lease lost');
    expect(quiet.lines.map((l) => (JSON.parse(l) as { msg: string }).msg)).toEqual(['lease lost']);
    const tty = captured();
    const pretty = createLogger({ level: 'info', destination: tty.stream, pretty: true });
    pretty.info({ run_id: 'r1' }, 'run started');
    expect(tty.lines.join('\n')).toMatch(/INFO.*run started/);
    expect(tty.lines.join('\n')).toMatch(/run_id: "r1"/);
    expect(() => JSON.parse(tty.lines[0]!)).toThrow();
  });
});

describe('metrics of a runtime', () => {
  let store: SqliteStore | undefined;
  afterEach(async () => store?.close());

  it('counts a recovery: a run whose worker lost its lease is claimed again (a lease expiry, a claim of kind recovery), and logs it as a warning', async () => {
    store = openSqliteStore({ path: ':memory:' });
    const out = captured();
    const agent = defineAgent({
      name: 'a',
      model: new ScriptedModel([{ text: 'ok' }], { loop: true, modelId: 'm-1' }),
    });
    const rt = createRuntime({ store, agents: [agent], leaseMs: 200 });
    const telemetry = instrumentRuntime(rt, { logger: createLogger({ level: 'info', destination: out.stream }) });
    const s = await rt.sessions.create();
    const sent = await rt.sessions.send(s.id, 'hi');
    // A worker that claims the run and dies at once: its lease runs out.
    expect(await store.claims.claim('dead-worker', 50, Date.now(), CLAIM_POLICY)).toBeDefined();
    await new Promise((r) => setTimeout(r, 80));
    rt.startWorker({ pollMs: 20 });
    expect((await rt.runs.wait(sent.run.id, { until: 'terminal' })).status).toBe('completed');
    const m = parseMetrics((await telemetry.metrics.render()).body);
    expect(m.get('keel_lease_expiries_total')).toBe(1);
    expect(m.get('keel_run_claims_total{kind="recovery"}')).toBe(1);
    expect(m.get('keel_tokens_total{agent="a",model="m-1",type="input"}')).toBe(10);
    const warn = out.lines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.run_id === sent.run.id && l.level === 40);
    expect(warn).toMatchObject({
      msg: 'run recovered: its previous worker lost the lease',
      session_id: s.id,
      attempt: 2,
    });
    telemetry.stop();
    await rt.close();
  });
});
