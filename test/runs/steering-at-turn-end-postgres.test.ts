/**
 * On PostgreSQL, steering that commits while a turn's last commit waits for the run's row is
 * answered by the run, not left for after its end (ADR-0048): the turn's end reads the steering
 * waiting for the run only once its append holds the run's row, which a steer reads FOR UPDATE.
 * Here the steer is a transaction of its own holding the run's row from before the turn's end
 * until after that end has sent its statements.
 */
import pg from 'pg';
import { afterEach, describe, expect, it } from 'vitest';
import { createRuntime, defineAgent, ScriptedModel, type Runtime } from '../../src/index.ts';
import { deferred } from '../support/deferred.ts';
import { openTestPostgres } from '../support/postgres.ts';

let cleanups: Array<() => Promise<void>> = [];
afterEach(async () => {
  for (const c of cleanups) await c();
  cleanups = [];
});

const lastUserText = (prompt: ReadonlyArray<{ role: string; content: unknown }>) => {
  const last = [...prompt].reverse().find((m) => m.role === 'user');
  return (last?.content as Array<{ type: string; text?: string }> | undefined)?.map((p) => p.text ?? '').join('') ?? '';
};

describe('steering at a turn’s end, PostgreSQL', () => {
  it('a steer committing while the turn’s last commit waits for the run is answered in the run', async () => {
    const t = await openTestPostgres({ poolSize: 4 });
    cleanups.push(t.cleanup);
    const streaming = deferred();
    const model = new ScriptedModel(
      [
        (call) => {
          const text = lastUserText(call.prompt as never);
          if (text.startsWith('also')) return { text: `answered: ${text}` };
          streaming.resolve();
          return { chunks: Array.from({ length: 10 }, (_, i) => `part ${i} `), chunkDelayMs: 30 };
        },
      ],
      { loop: true },
    );
    const rt: Runtime = createRuntime({ store: t.store, agents: [defineAgent({ name: 'a', model })] });
    cleanups.unshift(() => rt.close({ graceMs: 0 }));
    const session = await rt.sessions.create();
    const { run } = await rt.sessions.send(session.id, 'tell me');
    rt.startWorker({ id: 'W', pollMs: 20 });
    await streaming.promise;

    // The steer, by hand: the run's row read FOR UPDATE (as steer.ts does), held while the turn ends.
    const steer = new pg.Client({ connectionString: t.url });
    await steer.connect();
    cleanups.unshift(() => steer.end());
    const schema = `"${t.schema}"`;
    await steer.query('BEGIN');
    await steer.query(`SELECT * FROM ${schema}.runs WHERE id = $1 FOR UPDATE`, [run.id]);
    // Until the turn's last commit waits for the run's row.
    const watcher = new pg.Client({ connectionString: t.url });
    await watcher.connect();
    cleanups.unshift(() => watcher.end());
    for (let waited = 0; ; waited += 20) {
      const { rows } = await watcher.query<{ n: string }>(
        `SELECT count(*) AS n FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%keel_append(%'`,
      );
      if (Number(rows[0]!.n) > 0) break;
      if (waited > 10_000) throw new Error('the turn’s end never waited for the run’s row');
      await new Promise((r) => setTimeout(r, 20));
    }
    const message = {
      id: '01900000-0000-7000-8000-0000000000aa',
      role: 'user',
      content: [{ type: 'text', text: 'also this' }],
    };
    await steer.query(
      `INSERT INTO ${schema}.run_inputs (id, session_id, kind, run_id, payload, created_at) VALUES ($1, $2, 'steer', $3, $4, $5)`,
      [message.id, session.id, run.id, JSON.stringify({ message }), Date.now()],
    );
    await steer.query('COMMIT');

    const done = await rt.runs.wait(run.id, { until: 'terminal', timeoutMs: 10_000 });
    expect(done.status).toBe('completed');
    const events = await rt.sessions.log.read(session.id, { runId: run.id });
    const answers = events
      .filter((e) => e.type === 'assistant/message')
      .map((e) => JSON.stringify((e.data as { message: unknown }).message));
    // The run answered the steering: it was taken into the turn, not appended after the run's end.
    expect(answers.at(-1)).toContain('answered: also this');
    const steered = events.findIndex((e) => e.type === 'user/message' && (e.data as { via: string }).via === 'steer');
    const ended = events.findIndex((e) => e.type === 'turn/end');
    expect(steered).toBeGreaterThanOrEqual(0);
    expect(steered).toBeLessThan(ended);
  });
});
