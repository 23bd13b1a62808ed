import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { createRuntime, defineAgent, tool } from '../src/index.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { stepsModel } from './steps-model.ts';
const URL = 'postgres://postgres@127.0.0.1:5432/test';
let queries = 0;
const orig = pg.Client.prototype.query as any;
(pg.Client.prototype as any).query = function (...a: any[]) { queries++; return orig.apply(this, a); };
const agent = defineAgent({ name: 'bench', model: stepsModel(10), system: 'bench', tools: [tool({ name: 'inc', description: 'i', input: z.object({ n: z.number() }), idempotent: true, execute: async ({ n }) => n + 1 })], limits: { maxSteps: 11 } });
async function floor(): Promise<number> {
  const c = new pg.Client({ connectionString: URL }); await c.connect();
  const t = `floor_${randomBytes(3).toString('hex')}`;
  await c.query(`CREATE TABLE ${t} (id bigserial PRIMARY KEY, data text NOT NULL)`);
  const row = 'x'.repeat(600); const n = 300; const t0 = performance.now();
  for (let i = 0; i < n; i++) { await c.query('BEGIN'); await c.query({ name: 'f', text: `INSERT INTO ${t} (data) VALUES ($1)`, values: [row] }); await c.query('COMMIT'); }
  const us = ((performance.now() - t0) * 1000) / n; await c.query(`DROP TABLE ${t}`); await c.end(); return us;
}
const schema = `keel_c_${randomBytes(3).toString('hex')}`;
const store = new PostgresStore({ url: URL, schema, poolSize: 8 }); await store.opened();
const rt = createRuntime({ store, agents: [agent] });
const w = rt.startWorker({ id: 'c', concurrency: 1, pollMs: 5 });
async function keel(runs: number): Promise<{ us: number; rt: number }> {
  const ids: string[] = [];
  for (let i = 0; i < runs; i++) ids.push((await rt.sessions.send((await rt.sessions.create()).id, 'go', { }).catch(async () => { throw new Error('x'); })).run.id);
  return { us: 0, rt: 0 };
}
// warm
for (let i = 0; i < 5; i++) { const s = await rt.sessions.create(); const { run } = await rt.sessions.send(s.id, 'go'); await rt.runs.wait(run.id); }
const rows: string[] = [];
for (let round = 0; round < Number(process.env.ROUNDS ?? 3); round++) {
  const f = await floor();
  // sessions created before timing; sends timed with the runs (as bench:cluster's (c) creates runs before)
  const sess: string[] = []; for (let i = 0; i < 20; i++) sess.push((await rt.sessions.create()).id);
  const q0 = queries; const c0 = process.cpuUsage(); const t0 = performance.now();
  for (const s of sess) { const { run } = await rt.sessions.send(s, 'go'); await rt.runs.wait(run.id); }
  const us = ((performance.now() - t0) * 1000) / (20 * 11); const q = (queries - q0) / (20 * 11); const cu = process.cpuUsage(c0); const cpu = (cu.user + cu.system) / (20 * 11);
  rows.push(`floor ${f.toFixed(0)} µs  step ${us.toFixed(0)} µs  ratio ${(us / f).toFixed(2)}  queries/step ${q.toFixed(2)} cpu/step ${cpu.toFixed(0)} µs`);
  console.log(rows.at(-1));
}
await w.stop(); await rt.close(); await store.close();
const c = new pg.Client({ connectionString: URL }); await c.connect(); await c.query(`DROP SCHEMA "${schema}" CASCADE`); await c.end();
