import pg from 'pg';
import { randomBytes } from 'node:crypto';
import { z } from 'zod';
import { createRuntime, defineAgent, tool } from '../src/index.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { stepsModel } from './steps-model.ts';
const log: Array<{ t: number; text: string; ms: number }> = [];
let on = false;
const orig = pg.Client.prototype.query as any;
(pg.Client.prototype as any).query = function (q: any, ...rest: any[]) {
  const text = typeof q === 'string' ? q : q?.text;
  const t = performance.now();
  if (on && String(text).startsWith('SELECT * FROM runs WHERE id = $1') && !(globalThis as any).__shown) { (globalThis as any).__shown = 1; console.log(new Error().stack); }
  const rec = () => on && log.push({ t, text: String(text).replace(/\s+/g, ' ').slice(0, 110), ms: performance.now() - t });
  const cbi = rest.findIndex((x) => typeof x === 'function');
  if (cbi >= 0) { const cb = rest[cbi]; rest[cbi] = (...a: any[]) => { rec(); return cb(...a); }; return orig.call(this, q, ...rest); }
  if (q && typeof q.callback === 'function') { const cb = q.callback; q.callback = (...a: any[]) => { rec(); return cb(...a); }; return orig.call(this, q, ...rest); }
  const r = orig.call(this, q, ...rest);
  if (on && r && typeof r.then === 'function') r.then(() => log.push({ t, text: String(text).replace(/\s+/g, ' ').slice(0, 110), ms: performance.now() - t }), () => {});
  return r;
};
const schema = `keel_probe_${randomBytes(3).toString('hex')}`;
const store = new PostgresStore({ url: 'postgres://postgres@127.0.0.1:5432/test', schema, poolSize: 8 });
await store.opened();
const agent = defineAgent({ name: 'bench', model: stepsModel(10), system: 'bench', tools: [tool({ name: 'inc', description: 'i', input: z.object({ n: z.number() }), idempotent: process.env.IDEM !== '0', execute: async ({ n }) => n + 1 })], limits: { maxSteps: 11 } });
const rt = createRuntime({ store, agents: [agent] });
const w = process.env.WORKER ? rt.startWorker({ id: 'p', concurrency: 1, pollMs: 5 }) : undefined;
let t0 = 0;
for (let i = 0; i < 4; i++) {
  if (i === 3) { t0 = performance.now(); on = true; (globalThis as any).__trace = 1; }
  const s = await rt.sessions.create();
  const { run } = await rt.sessions.send(s.id, 'go');
  await rt.runs.wait(run.id);
  if (process.env.READ) await rt.sessions.transcript?.(s.id);
}
on = false; await w?.stop();
for (const l of log) console.log((l.t - t0).toFixed(2).padStart(8), l.ms.toFixed(2).padStart(6), l.text);
console.log('total', (performance.now() - t0).toFixed(1), 'queries', log.length);
await rt.close(); await store.close();
const c = new pg.Client({ connectionString: 'postgres://postgres@127.0.0.1:5432/test' }); await c.connect(); await c.query(`DROP SCHEMA "${schema}" CASCADE`); await c.end();
