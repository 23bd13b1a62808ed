import pg from 'pg';
import { z } from 'zod';
import { createRuntime, defineAgent, tool } from '../src/index.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { stepsModel } from './steps-model.ts';
const TOOL_STEPS = 10;
const RUNS = Number(process.env.RUNS ?? 400);
const schema = `probe_${process.pid}`;
const url = 'postgres://postgres@127.0.0.1:5432/test';
const store = new PostgresStore({ url, schema, poolSize: 8 });
await store.opened();
if (process.env.NOCOUNT) { const c0 = new pg.Client({ connectionString: url }); await c0.connect(); const f = (await c0.query(`SELECT pg_get_functiondef('${schema}.keel_count_runs'::regproc) AS d`)).rows[0].d.replaceAll('& 31', '& 4095'); await c0.query(f); await c0.end(); }
const agent = defineAgent({
  name: 'bench', model: stepsModel(TOOL_STEPS), system: 'bench',
  tools: [tool({ name: 'inc', description: 'i', input: z.object({ n: z.number() }), idempotent: true, execute: async ({ n }) => n + 1 })],
  limits: { maxSteps: TOOL_STEPS + 1 },
});
const setup = createRuntime({ store, agents: [agent] });
for (let i = 0; i < RUNS; i++) await setup.sessions.send((await setup.sessions.create()).id, `t${i}`);
await setup.close();
const rt = createRuntime({ store, agents: [agent] });
const { Session } = await import('node:inspector/promises');
const session = new Session(); session.connect();
if (process.env.PROF) { await session.post('Profiler.enable'); await session.post('Profiler.start'); }
const cpu0 = process.cpuUsage();
const t0 = performance.now();
const w = rt.startWorker({ id: 'w', concurrency: Number(process.env.C ?? 64), pollMs: 20 });
for (;;) {
  const c = await store.runs.list({ statuses: ['completed'], limit: RUNS + 1 });
  if (c.length >= RUNS) break;
  await new Promise((r) => setTimeout(r, 20));
}
const ms = performance.now() - t0;
const cpu = process.cpuUsage(cpu0);
if (process.env.PROF) { const { profile } = await session.post('Profiler.stop'); (await import('node:fs')).writeFileSync('/tmp/w.cpuprofile', JSON.stringify(profile)); }
console.log(`steps/s ${(RUNS * (TOOL_STEPS + 1) / ms * 1000).toFixed(0)}; worker CPU µs/step ${((cpu.user + cpu.system) / (RUNS * (TOOL_STEPS + 1))).toFixed(0)} (user ${(cpu.user / (RUNS * 11)).toFixed(0)}, sys ${(cpu.system / (RUNS * 11)).toFixed(0)})`);
await w.stop();
await rt.close();
const c = new pg.Client({ connectionString: url }); await c.connect(); await c.query(`DROP SCHEMA ${schema} CASCADE`); await c.end();
await store.close();
