import pg from 'pg';
import { readFileSync } from 'node:fs';
import { randomBytes, randomUUID } from 'node:crypto';
import { PostgresStore } from '../src/store/postgres/index.ts';
const URL = 'postgres://postgres@127.0.0.1:5432/test';
const schema = `keel_m_${randomBytes(3).toString('hex')}`;
const store = new PostgresStore({ url: URL, schema, poolSize: 2 }); await store.opened(); await store.close();
const c = new pg.Client({ connectionString: URL, options: `-c search_path=${schema}` }); await c.connect();
const pid = (c as any).processID as number;
const cpu = () => { const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' '); return (Number(f[11]) + Number(f[12])) * 10000; }; // µs (100 Hz)
const sched = () => Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[0]) / 1000;
await c.query(`INSERT INTO sessions (id, tenant, created_at) VALUES ('s', 'default', 0)`).catch(async (e) => { console.log(e.message); });
const N = 1000;
const data = JSON.stringify({ text: 'x'.repeat(250) });
const ev = (n: number) => { const ids = Array.from({ length: n }, () => randomUUID()); return [ids, ids.map(() => 'test/note'), ids.map(() => 1), ids.map(() => 0), ids.map(() => null), ids.map(() => 1), ids.map(() => 1), ids.map(() => false), ids.map(() => null), ids.map(() => false), ids.map(() => null), ids.map(() => false), ids.map(() => false), ids.map(() => data)]; };
async function bench(name: string, fn: () => Promise<unknown>) {
  for (let i = 0; i < 100; i++) await fn();
  const s0 = sched(); const t0 = performance.now();
  for (let i = 0; i < N; i++) await fn();
  console.log(name.padEnd(30), 'wall', ((performance.now() - t0) * 1000 / N).toFixed(0), 'µs  server', ((sched() - s0) / N).toFixed(0), 'µs');
}
await bench('append_many 1 item 4 ev', () => c.query({ name: 'am', text: `SELECT * FROM keel_append_many(true, '{}', '{}','{}','{}','{}','{}', $1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::int[], $6::int[], $7::text[], $8::text[], $9::int[], $10::bigint[], $11::text[], $12::int[], $13::int[], $14::boolean[], $15::text[], $16::boolean[], $17::text[], $18::boolean[], $19::boolean[], $20::text[], $21::text[])`, values: [['s'], [null], [null], [null], [4], [0], ...ev(4), []] }));
await bench('append_many + notify', () => c.query({ name: 'amn', text: `SELECT * FROM keel_append_many(true, '{}', '{}','{}','{}','{}','{}', $1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::int[], $6::int[], $7::text[], $8::text[], $9::int[], $10::bigint[], $11::text[], $12::int[], $13::int[], $14::boolean[], $15::text[], $16::boolean[], $17::text[], $18::boolean[], $19::boolean[], $20::text[], $21::text[])`.replace("true, '{}'", "true, ARRAY['{\"o\":\"x\",\"b\":[]}']"), values: [['s'], [null], [null], [null], [4], [0], ...ev(4), []] }));
const l = new pg.Client({ connectionString: URL }); await l.connect(); await l.query(`LISTEN "keel_${schema}"`); let heard = 0; l.on('notification', () => heard++);
await bench('append_many listened', () => c.query({ name: 'aml', text: `SELECT /*l*/ * FROM keel_append_many(true, '{}', '{}','{}','{}','{}','{}', $1::text[], $2::text[], $3::bigint[], $4::bigint[], $5::int[], $6::int[], $7::text[], $8::text[], $9::int[], $10::bigint[], $11::text[], $12::int[], $13::int[], $14::boolean[], $15::text[], $16::boolean[], $17::text[], $18::boolean[], $19::boolean[], $20::text[], $21::text[])`, values: [['s'], [null], [null], [null], [4], [0], ...ev(4), []] }));
console.log('heard', heard); await l.end();
await bench('keel_append 4 ev', () => c.query({ name: 'a', text: `SELECT * FROM keel_append('s', NULL, NULL, NULL, $1::text[], $2::text[], $3::int[], $4::bigint[], $5::text[], $6::int[], $7::int[], $8::boolean[], $9::text[], $10::boolean[], $11::text[], $12::boolean[], $13::boolean[], $14::text[], $15::text[])`, values: [...ev(4), []] }));
await bench('BEGIN/INSERT/COMMIT 1 row', async () => { await c.query('BEGIN'); await c.query({ name: 'i', text: `INSERT INTO blobs (hash, data, size, created_at) VALUES ($1, $2, 1, 0)`, values: [randomUUID(), data] }); await c.query('COMMIT'); });
await bench('SELECT 1', () => c.query({ name: 'one', text: 'SELECT 1' }));
await c.query(`DROP SCHEMA "${schema}" CASCADE`); await c.end();
