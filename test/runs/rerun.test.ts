/**
 * Reruns (issue 40) through the library, on SQLite and PostgreSQL: a session of three recorded
 * runs; the second is rerun from step 2 on version 2. Its session is a fork at step 2's context
 * (the same request as the original's), the original is untouched, the effectful tool's recorded
 * result is reused (its execute count does not move), and a changed argument fails the rerun
 * unless the policy says to run the tool. Lineage, policies and bad requests too.
 */
import { afterEach, describe, expect, it } from 'vitest';
import {
  compareRuns,
  readComparedRun,
  SqliteStore,
  type RequestHeader,
  type Runtime,
  type SessionEvent,
} from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';
import { travelRuntime } from '../support/travel-agents.ts';

const runEvents = (rt: Runtime, sessionId: string, runId: string) => rt.sessions.log.read(sessionId, { runId });
const headerOf = (events: SessionEvent[], step: number) =>
  events.findLast((e) => e.type === 'request/header' && e.step === step)!.data as RequestHeader;
const finalText = (events: SessionEvent[]) =>
  events
    .filter((e) => e.type === 'assistant/message')
    .at(-1)!
    .data.message.content.map((p: { type: string; text?: string }) => p.text ?? '')
    .join('');

describe.each(['sqlite', 'postgres'] as const)('reruns (%s)', (backend) => {
  let rt: Runtime | undefined;
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await rt?.close({ graceMs: 0 });
    await close?.();
    rt = undefined;
  });

  async function recorded() {
    const opened = await openBackendStore(backend);
    const store = opened.store;
    close = opened.close;
    const t = travelRuntime(store);
    rt = t.rt;
    const session = await t.rt.sessions.create({ title: 'trips' });
    const runs: string[] = [];
    for (const city of ['paris', 'tokyo', 'berlin']) {
      const { run } = await t.rt.sessions.send(session.id, `book ${city}`, { agent: 'travel@1' });
      const done = await t.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
      expect(done.status).toBe('completed');
      runs.push(run.id);
    }
    expect(t.executed).toEqual({ lookup: 3, book: 3 });
    return { ...t, session, runs };
  }

  it('from step 2 on version 2, tools reused: the same request at step 2, the booking not run again, the new answer', async () => {
    const { rt, executed, session, runs } = await recorded();
    const source = runs[1]!;
    const before = await rt.sessions.get(session.id);

    const rerun = await rt.runs.rerun(source, { from: 2, agent: 'travel@2', tools: 'reuse' });
    expect(rerun.status).toBe('queued');
    expect(rerun.rerunOf).toBe(source);
    expect(rerun.agent).toEqual({ name: 'travel', version: '2' });
    expect(rerun.sessionId).not.toBe(session.id);
    expect(rerun.options.rerun).toMatchObject({
      of: { sessionId: session.id, runId: source, step: 2 },
      agent: { name: 'travel', version: '2' },
      tools: { default: 'reuse' },
    });
    const done = await rt.runs.wait(rerun.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');

    // Nothing ran again: lookup (read-only) would have, but `reuse` for every tool says otherwise.
    expect(executed).toEqual({ lookup: 3, book: 3 });
    const original = await runEvents(rt, session.id, source);
    const again = await runEvents(rt, rerun.sessionId, rerun.id);
    // The rerun's steps are the source's numbering: it starts at 2.
    expect([...new Set(again.flatMap((e) => (e.step !== undefined ? [e.step] : [])))]).toEqual([2, 3]);
    // Step 2's request is the original's: the fork holds exactly its context.
    expect(headerOf(again, 2).promptHash).toBe(headerOf(original, 2).promptHash);
    expect(headerOf(again, 2).context.messages).toBe(headerOf(original, 2).context.messages);
    expect(headerOf(again, 2).modelId).toBe('travel-2');
    const result = again.find((e) => e.type === 'tool/result')!;
    expect(result.data).toMatchObject({
      toolName: 'book',
      source: 'reused',
      output: { type: 'json', value: { booked: 'tokyo', seats: 1, ref: 'R2' } },
    });
    expect(finalText(original)).toBe('Booked tokyo.');
    expect(finalText(again)).toBe('Your trip to tokyo is booked.');

    // The comparison: step 1 is the shared context; the booking is the same call, reused; the answer changed.
    const cmp = compareRuns(
      await readComparedRun(rt.sessions, await rt.runs.get(source)),
      await readComparedRun(rt.sessions, done),
    );
    expect(cmp.forkedAt).toBe(2);
    expect(cmp.steps.map((x) => [x.step, x.presentIn])).toEqual([
      [2, 'both'],
      [3, 'both'],
    ]);
    expect(cmp.steps[0]!.toolCalls[0]).toMatchObject({
      equal: true,
      arguments: true,
      result: true,
      a: { name: 'book', source: 'executed' },
      b: { name: 'book', source: 'reused' },
    });
    expect(cmp.steps[1]!.text.equal).toBe(false);
    expect(cmp.finalAnswer).toMatchObject({ a: 'Booked tokyo.', b: 'Your trip to tokyo is booked.', equal: false });

    // The original session is untouched; the fork's transcript has the first run and the rerun.
    const after = await rt.sessions.get(session.id);
    expect(after.lastSeq).toBe(before.lastSeq);
    const forked = await rt.sessions.get(rerun.sessionId);
    expect(forked.origin).toMatchObject({ sessionId: session.id });
    expect(forked.title).toContain('rerun of trips from step 2 on travel@2');
    const context = await rt.sessions.context(rerun.sessionId);
    const texts = context.messages.flatMap((m) =>
      m.role === 'user' || m.role === 'assistant' ? m.content.flatMap((p) => (p.type === 'text' ? [p.text] : [])) : [],
    );
    expect(texts).toEqual(['book paris', 'Booked paris.', 'book tokyo', 'Your trip to tokyo is booked.']);

    // Lineage by query.
    expect((await rt.runs.list({ rerunOf: source })).map((r) => r.id)).toEqual([rerun.id]);
    expect(await rt.runs.list({ rerunOf: runs[0]! })).toEqual([]);
  });

  it('the default policy runs read-only tools and reuses the others; from step 1 the turn starts again', async () => {
    const { rt, executed, runs } = await recorded();
    const rerun = await rt.runs.rerun(runs[0]!, { agent: 'travel@2' });
    expect(rerun.options.rerun).toMatchObject({ of: { step: 1 }, tools: {} });
    const done = await rt.runs.wait(rerun.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    expect(executed).toEqual({ lookup: 4, book: 3 });
    const events = await runEvents(rt, rerun.sessionId, rerun.id);
    expect(events.filter((e) => e.type === 'tool/result').map((e) => [e.data.toolName, e.data.source])).toEqual([
      ['lookup', undefined],
      ['book', 'reused'],
    ]);
    // The fork is at the trigger: the rerun appends no user message of its own.
    expect(events.some((e) => e.type === 'user/message')).toBe(false);
  });

  it('a changed argument fails the rerun without running the effectful tool, unless the policy says execute', async () => {
    const { rt, executed, runs } = await recorded();
    const refused = await rt.runs.rerun(runs[2]!, { from: 2, agent: 'travel@3' });
    const failed = await rt.runs.wait(refused.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatchObject({ kind: 'tool', code: 'rerun_mismatch' });
    expect(String(failed.error!.message)).toContain('book({"city":"berlin","seats":2}) has no recorded result');
    expect(executed.book).toBe(3);

    const ran = await rt.runs.rerun(runs[2]!, {
      from: 2,
      agent: 'travel@3',
      tools: { tools: { book: { mode: 'reuse', onMismatch: 'execute' } } },
    });
    const done = await rt.runs.wait(ran.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    expect(executed.book).toBe(4);
    const events = await runEvents(rt, ran.sessionId, ran.id);
    expect(events.find((e) => e.type === 'tool/result')!.data).toMatchObject({
      output: { type: 'json', value: { booked: 'berlin', seats: 2 } },
    });
    expect(events.find((e) => e.type === 'tool/result')!.data.source).toBeUndefined();

    // `serve` answers the changed call with the recorded result anyway; `mock` with the given value.
    const served = await rt.runs.rerun(runs[2]!, {
      from: 2,
      agent: 'travel@3',
      tools: { tools: { book: { mode: 'reuse', onMismatch: 'serve' } } },
    });
    expect((await rt.runs.wait(served.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    const mocked = await rt.runs.rerun(runs[2]!, {
      from: 2,
      agent: 'travel@3',
      tools: { tools: { book: { mode: 'mock', value: { booked: 'nowhere' } } } },
    });
    expect((await rt.runs.wait(mocked.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect(executed.book).toBe(4);
    const sources = async (r: { id: string; sessionId: string }) =>
      (await runEvents(rt, r.sessionId, r.id))
        .filter((e) => e.type === 'tool/result')
        .map((e) => [e.data.source, e.data.output]);
    expect(await sources(served)).toEqual([
      ['reused', { type: 'json', value: { booked: 'berlin', seats: 1, ref: 'R3' } }],
    ]);
    expect(await sources(mocked)).toEqual([['mocked', { type: 'json', value: { booked: 'nowhere' } }]]);
  });

  it('a replacement message reruns the turn with it; a rerun of a rerun is listed under it', async () => {
    const { rt, runs } = await recorded();
    const rerun = await rt.runs.rerun(runs[1]!, { message: 'book berlin', tools: 'execute' });
    const done = await rt.runs.wait(rerun.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    const events = await runEvents(rt, rerun.sessionId, rerun.id);
    expect(finalText(events)).toBe('Booked berlin.');
    expect(rerun.options.rerun).toMatchObject({ messageReplaced: true, of: { step: 1 } });

    const again = await rt.runs.rerun(rerun.id, { from: 3 });
    expect((await rt.runs.wait(again.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
    expect((await rt.runs.list({ rerunOf: rerun.id })).map((r) => r.id)).toEqual([again.id]);
    expect(finalText(await runEvents(rt, again.sessionId, again.id))).toBe('Booked berlin.');
  });

  it('refuses what it cannot do, precisely', async () => {
    const { rt, runs } = await recorded();
    await expect(rt.runs.rerun(runs[0]!, { from: 7 })).rejects.toMatchObject({
      name: 'RerunRequestError',
      field: 'from',
      message: expect.stringContaining('recorded steps 1 to 3; from 7 is not one of them'),
    });
    await expect(rt.runs.rerun(runs[0]!, { from: 2, message: 'x' })).rejects.toMatchObject({ field: 'message' });
    await expect(rt.runs.rerun(runs[0]!, { tools: { tools: { nope: { mode: 'execute' } } } })).rejects.toMatchObject({
      field: 'tools',
    });
    await expect(rt.runs.rerun(runs[0]!, { overrides: { model: 'openai:gpt-4.1' } })).rejects.toMatchObject({
      field: 'overrides.model',
    });
    await expect(rt.runs.rerun(runs[0]!, { overrides: { tools: ['fly'] } })).rejects.toMatchObject({
      field: 'overrides.tools',
    });
    await expect(rt.runs.rerun(runs[0]!, { agent: 'travel@9' })).rejects.toMatchObject({ code: 'unknown_agent' });
    await expect(rt.runs.rerun('nope')).rejects.toMatchObject({ name: 'NotFoundError' });
  });
});

describe('a rerun interrupted mid-step', () => {
  it('is recovered by another worker and goes on at its own step numbers, tools still reused', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const first = travelRuntime(store);
    const session = await first.rt.sessions.create();
    const { run } = await first.rt.sessions.send(session.id, 'book rome', { agent: 'travel@1' });
    await first.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    await first.rt.close({ graceMs: 0 });

    // A slow model: the worker is stopped once step 2 ended, while step 3's model call streams.
    const slow = travelRuntime(store, {}, { delayMs: 100 });
    const rerun = await slow.rt.runs.rerun(run.id, { from: 2, agent: 'travel@2', tools: 'reuse' });
    for (const deadline = Date.now() + 10_000; ;) {
      const events = await slow.rt.sessions.log.read(rerun.sessionId, { runId: rerun.id });
      if (events.some((e) => e.type === 'step/end' && e.step === 2)) break;
      if (Date.now() > deadline) throw new Error('step 2 never ended');
      await new Promise((r) => setTimeout(r, 5));
    }
    expect((await slow.rt.runs.get(rerun.id)).status).toBe('running');
    await slow.rt.close({ graceMs: 0 });
    expect((await store.runs.get(rerun.id))?.status).toBe('queued');

    const again = travelRuntime(store);
    const done = await again.rt.runs.wait(rerun.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    const events = await again.rt.sessions.log.read(rerun.sessionId, { runId: rerun.id });
    const decided = events.filter((e) => e.type === 'assistant/message').map((e) => e.step);
    expect(decided).toEqual([2, 3]);
    // It was resumed (not started over): its second turn/start says so.
    expect(events.filter((e) => e.type === 'turn/start').map((e) => e.data.resumed)).toEqual([false, true]);
    expect(events.filter((e) => e.type === 'tool/result').map((e) => e.data.source)).toEqual(['reused']);
    expect(again.executed.book + slow.executed.book).toBe(0);
    await again.rt.close({ graceMs: 0 });
    await store.close();
  });
});

describe('a run with overrides of its own (RunOptions.overrides)', () => {
  it('runs with them, records them in its agent spec, and refuses an unknown tool or a bad option by name', async () => {
    const store = new SqliteStore({ path: ':memory:' });
    const { rt } = travelRuntime(store);
    try {
      const s = await rt.sessions.create();
      const { run } = await rt.sessions.send(s.id, 'book oslo', {
        agent: 'travel@1',
        overrides: { system: 'Be terse.', tools: ['lookup', 'book'], maxSteps: 5 },
      });
      expect(run.agentSpec).toMatchObject({ system: 'Be terse.', limits: { maxSteps: 5 } });
      const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
      expect(done.status).toBe('completed');
      const headers = (await rt.sessions.log.read(s.id, { runId: run.id })).filter((e) => e.type === 'request/header');
      const systems = await rt.sessions.content(headers.map((h) => (h.data as RequestHeader).system));
      expect([...new Set(systems.values())]).toEqual(['Be terse.']);
      await expect(rt.sessions.send(s.id, 'x', { overrides: { tools: ['fly'] } })).rejects.toMatchObject({
        name: 'InvalidSendOptionError',
        field: 'overrides.tools',
      });
      await expect(rt.sessions.send(s.id, 'x', { overrides: { colour: 'red' } as never })).rejects.toMatchObject({
        name: 'InvalidSendOptionError',
      });
    } finally {
      await rt.close({ graceMs: 0 });
      await store.close();
    }
  });
});
