/**
 * Datasets, experiments and bulk reruns through the library (issue 40), on SQLite and PostgreSQL:
 * a dataset of recorded runs; step replay on the version that recorded them rebuilds every
 * request byte for byte (the same fingerprint) and scores perfectly; another version's changed
 * answers score lower and are listed as regressions, worst first; full reruns are real runs with
 * lineage; late scores merge; code and judge scorers run; erasing a source session removes its
 * items; a bulk rerun reruns every run a filter matches, once.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { judgeScorer, ScriptedModel, type ExperimentResults, type Runtime } from '../../src/index.ts';
import { openBackendStore } from '../support/backend-store.ts';
import { travelRuntime } from '../support/travel-agents.ts';

describe.each(['sqlite', 'postgres'] as const)('evaluations (%s)', (backend) => {
  let rt: Runtime | undefined;
  let close: (() => Promise<void>) | undefined;
  afterEach(async () => {
    await rt?.close({ graceMs: 0 });
    await close?.();
    rt = undefined;
  });

  async function recorded(cities = ['paris', 'tokyo', 'berlin']) {
    const opened = await openBackendStore(backend);
    const store = opened.store;
    close = opened.close;
    const judged: string[] = [];
    const t = travelRuntime(store, {
      scorers: {
        // A code scorer: the answer names the same city as the recorded one.
        names_city: (item, candidate, reference) => {
          judged.push(item.id);
          const city = (t: string | null) => /paris|tokyo|berlin/.exec(t ?? '')?.[0];
          return city(candidate.finalText) !== undefined && city(candidate.finalText) === city(reference.finalText)
            ? 1
            : 0;
        },
        // A model as judge (scripted: it likes answers that say "trip").
        judge: judgeScorer({
          model: new ScriptedModel(
            [
              (call) => {
                const text = JSON.stringify(call.prompt);
                return { text: /Candidate answer: [^"]*trip/.test(text) ? '{"score": 1}' : '{"score": 0.5}' };
              },
            ],
            { loop: true },
          ),
          rubric: 'The answer mentions the trip.',
        }),
      },
    });
    rt = t.rt;
    const session = await t.rt.sessions.create({ title: 'trips' });
    const runs: string[] = [];
    for (const city of cities) {
      const { run } = await t.rt.sessions.send(session.id, `book ${city}`, { agent: 'travel@1' });
      expect((await t.rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 })).status).toBe('completed');
      runs.push(run.id);
    }
    return { ...t, session, runs, judged };
  }

  const candidate = (r: ExperimentResults, label: string) => r.candidates.find((c) => c.label === label)!;

  it('step replay: the recording version reproduces every request byte for byte and scores 1; version 2 regresses', async () => {
    const { rt, runs, executed } = await recorded();
    const dataset = await rt.evals.datasets.create({ name: 'trips', runs });
    expect(dataset.itemCount).toBe(3);
    const items = await rt.evals.datasets.items(dataset.id);
    expect(items.map((i) => i.sourceRunId)).toEqual(runs);

    const exp = await rt.evals.experiments.create({
      dataset: dataset.id,
      candidates: ['travel@1', 'travel@2'],
      scorers: ['tool_calls', 'arguments', 'final_text', 'status'],
    });
    expect(exp.kind).toBe('experiment');
    expect((await rt.evals.wait(exp.id, { timeoutMs: 20_000 })).status).toBe('completed');
    const results = await rt.evals.experiments.results(exp.id);
    expect(results.counts).toMatchObject({ done: 6, failed: 0, pending: 0, running: 0 });

    const same = candidate(results, 'travel@1');
    expect(same.scores).toMatchObject({ tool_calls: 1, arguments: 1, final_text: 1, status: 1, score: 1 });
    expect(same.vsBaseline).toBe(0);
    expect(same.regressions).toEqual([]);
    // Byte for byte: every replayed request has the recorded fingerprint (3 steps per run).
    const replayed = (await rt.evals.experiments.items(exp.id, { limit: 100 })).filter(
      (i) => (i.subject as { candidate: string }).candidate === 'travel@1',
    );
    expect(replayed.map((i) => i.result!.requestsMatched)).toEqual([3, 3, 3]);

    const v2 = candidate(results, 'travel@2');
    expect(v2.scores.tool_calls).toBe(1);
    expect(v2.scores.final_text).toBeLessThan(1);
    expect(v2.vsBaseline).toBeLessThan(0);
    expect(v2.regressions.map((r) => r.sourceRunId).sort()).toEqual([...runs].sort());
    expect(v2.regressions[0]!.diff).toBeLessThanOrEqual(v2.regressions.at(-1)!.diff);
    // Nothing ran: step replay makes decisions only.
    expect(executed).toEqual({ lookup: 3, book: 3 });
  });

  it('full reruns are runs with lineage, tools by policy; code and judge scorers; late scores merge', async () => {
    const { rt, runs, executed, judged } = await recorded(['paris', 'tokyo']);
    const dataset = await rt.evals.datasets.create({
      name: 'two',
      filter: { agent: 'travel@1', statuses: ['completed'] },
    });
    expect(dataset.itemCount).toBe(2);
    const exp = await rt.evals.experiments.create({
      dataset: dataset.id,
      mode: 'rerun',
      candidates: [{ agent: 'travel@2', label: 'v2' }],
      baseline: 'travel@1',
      tools: 'reuse',
      concurrency: 2,
    });
    await rt.evals.wait(exp.id, { timeoutMs: 20_000 });
    const results = await rt.evals.experiments.results(exp.id);
    expect(results.baseline).toBe('baseline');
    const v2 = candidate(results, 'v2');
    expect(v2.done).toBe(2);
    expect(v2.scores.judge).toBe(1);
    expect(candidate(results, 'baseline').scores.judge).toBe(0.5);
    expect(v2.scores.names_city).toBe(1);
    expect(judged).toHaveLength(4);
    // Reruns with every tool reused: nothing executed again.
    expect(executed).toEqual({ lookup: 2, book: 2 });
    const items = await rt.evals.experiments.items(exp.id);
    const reruns = await Promise.all(items.map((i) => rt.runs.get(i.runId!)));
    expect(reruns.map((r) => r.rerunOf).sort()).toEqual([...runs, ...runs].sort());
    expect(new Set(reruns.map((r) => r.status))).toEqual(new Set(['completed']));

    const late = await rt.evals.experiments.score(exp.id, items[0]!.id, { rating: 0.25 });
    expect(late.scores).toMatchObject({ rating: 0.25, score: expect.any(Number) });
    const after = await rt.evals.experiments.results(exp.id);
    const rated = after.candidates.find((c) => c.label === (items[0]!.subject as { candidate: string }).candidate)!;
    expect(rated.scores.rating).toBe(0.25);
    await expect(rt.evals.experiments.score(exp.id, items[0]!.id, { score: 1 })).rejects.toMatchObject({
      code: 'validation',
    });
  });

  it('erasing a source session removes its items; another tenant sees nothing; bad requests are refused', async () => {
    const { rt, runs, session } = await recorded(['paris']);
    const dataset = await rt.evals.datasets.create({
      name: 'one',
      runs: [{ runId: runs[0]!, expected: 'Booked paris.' }],
    });
    await expect(rt.evals.datasets.get(dataset.id, { tenant: 'globex' })).rejects.toMatchObject({
      name: 'NotFoundError',
    });
    await expect(rt.evals.datasets.create({ name: 'x', runs }, { tenant: 'globex' })).rejects.toMatchObject({
      name: 'NotFoundError',
    });
    await expect(rt.evals.experiments.create({ dataset: dataset.id, candidates: ['travel@9'] })).rejects.toMatchObject({
      code: 'unknown_agent',
    });
    await expect(
      rt.evals.experiments.create({ dataset: dataset.id, candidates: ['travel@1'], scorers: ['vibes'] }),
    ).rejects.toMatchObject({ code: 'validation' });
    await expect(rt.evals.datasets.create({ name: 'x' })).rejects.toMatchObject({ code: 'validation' });

    await rt.sessions.erase(session.id);
    expect((await rt.evals.datasets.get(dataset.id)).itemCount).toBe(0);
    expect(await rt.evals.datasets.items(dataset.id)).toEqual([]);
  });

  it('a bulk rerun reruns every run the filter matches, once', async () => {
    const { rt, runs } = await recorded();
    const batch = await rt.evals.reruns.create({
      filter: { agent: 'travel@1', statuses: ['completed'] },
      rerun: { agent: 'travel@2', tools: 'reuse' },
      concurrency: 2,
    });
    expect((await rt.evals.wait(batch.id, { timeoutMs: 20_000 })).status).toBe('completed');
    const items = await rt.evals.reruns.items(batch.id);
    expect(items.map((i) => (i.subject as { runId: string }).runId)).toEqual(runs);
    expect(items.every((i) => i.status === 'done' && i.result!.status === 'completed')).toBe(true);
    for (const run of runs) expect((await rt.runs.list({ rerunOf: run })).length).toBe(1);
    await expect(rt.evals.reruns.create({ filter: { agent: 'nobody' }, rerun: {} })).rejects.toMatchObject({
      code: 'validation',
    });
  });
});
