// Traces every query a worker sends for runs executed one at a time on PostgreSQL.
import pg from 'pg';
import { z } from 'zod';
import { createRuntime, defineAgent, tool } from '../src/index.ts';
import { PostgresStore } from '../src/store/postgres/index.ts';
import { stepsModel } from './steps-model.ts';

const TOOL_STEPS = 10;
const schema = `probe_${process.pid}`;
const url = 'postgres://postgres@127.0.0.1:5432/test';
const store = new PostgresStore({ url, schema, poolSize: 8 });
await store.opened();
const agent = defineAgent({
  name: 'bench', model: stepsModel(TOOL_STEPS), system: 'bench',
  tools: [tool({ name: 'inc', description: 'i', input: z.object({ n: z.number() }), idempotent: true, execute: async ({ n }) => n + 1 })],
  limits: { maxSteps: TOOL_STEPS + 1 },
});
const rt = createRuntime({ store, agents: [agent] });
const held = await rt.sessions.create();
const holdOff = rt.sessions.subscribe(held.id, () => {});
let log: string[] | null = null;
const t0 = { v: 0 };
const orig = pg.Client.prototype.query as any;
(pg.Client.prototype as any).query = function (...args: any[]) {
  const q = args[0];
  const text: string = typeof q === 'string' ? q : (q?.text ?? q?.name ?? String(q?.constructor?.name));
  const start = performance.now();
  const me = log;
  const pid = (this as any).processID;
  const done = () => { if (me) me.push([start - t0.v, performance.now() - start, pid, text] as any); };
  const cbi = args.findIndex((a: any) => typeof a === 'function');
  const cb2 = typeof q?.callback === 'function' ? q.callback : null;
  if (cbi >= 0) { const cb = args[cbi]; args[cbi] = (...x: any[]) => { done(); return cb(...x); }; return orig.apply(this, args); }
  if (cb2) { q.callback = (...x: any[]) => { done(); return cb2(...x); }; return orig.apply(this, args); }
  const r = orig.apply(this, args);
  if (r && typeof r.then === 'function') r.then(done, done);
  return r;
};
const N = Number(process.env.N ?? 3);
for (let round = 0; round < 2; round++) {
  const sessions: string[] = [];
  for (let i = 0; i < N; i++) { const s = await rt.sessions.create(); await rt.sessions.send(s.id, `t${i}`); sessions.push(s.id); }
  let left = N; let done!: () => void; const ended = new Promise<void>((r) => (done = r));
  const offs = sessions.map((id) => rt.sessions.subscribe(id, (item: any) => {
    if (item.kind === 'event' && item.event.type === 'run/status' && ['completed','failed'].includes(item.event.data.to) && --left === 0) done();
  }));
  if (round === 1) { log = []; }
  t0.v = performance.now();
  const w = rt.startWorker({ id: 'one', concurrency: 1, pollMs: 5 });
  await ended;
  const total = performance.now() - t0.v;
  const mine = log; log = null;
  for (const o of offs) o();
  await w.stop();
  if (mine) { console.log(mine.map((x: any) => `${(x[0]*1000).toFixed(0).padStart(7)} +${(x[1]*1000).toFixed(0).padStart(5)} [${x[2]}] ${x[3].replace(/\s+/g, ' ').slice(0, 100)}`).join('\n')); console.log(`total ${total.toFixed(0)} µs? ms=${total.toFixed(2)} per step µs ${(total*1000/(N*(TOOL_STEPS+1))).toFixed(0)} queries ${mine.length}`); }
}
holdOff();
await rt.close();
const c = new pg.Client({ connectionString: url }); await c.connect(); await c.query(`DROP SCHEMA ${schema} CASCADE`); await c.end();
await store.close();
