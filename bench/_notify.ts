import pg from 'pg';
const url = 'postgres://postgres@127.0.0.1:5432/test';
const c = new pg.Client({ connectionString: url }); await c.connect();
await c.query('DROP TABLE IF EXISTS public._t; CREATE TABLE public._t (id bigserial primary key, data text)');
const row = 'x'.repeat(2800);
async function time(label: string, f: () => Promise<unknown>, n = 2000) {
  for (let i = 0; i < 200; i++) await f();
  const t = performance.now(); for (let i = 0; i < n; i++) await f();
  console.log(label, (((performance.now() - t) * 1000) / n).toFixed(0), 'µs');
}
const ins = () => c.query({ name: 'i', text: 'INSERT INTO public._t (data) VALUES ($1)', values: [row] });
const insN = () => c.query({ name: 'in', text: "WITH x AS (INSERT INTO public._t (data) VALUES ($1)) SELECT pg_notify('keel_x', '{\"s\":\"abc\",\"q\":1}')", values: [row] });
await time('select 1', () => c.query({ name: 's', text: 'SELECT 1' }));
for (const listen of [false, true]) {
  let l: pg.Client | undefined; let got = 0;
  if (listen) { l = new pg.Client({ connectionString: url }); await l.connect(); l.on('notification', () => got++); await l.query('LISTEN keel_x'); }
  console.log('listener in this process:', listen);
  await time(' autocommit insert', ins);
  await time(' autocommit insert + notify', insN);
  await time(' notify alone', () => c.query({ name: 'n', text: "SELECT pg_notify('keel_x', 'y')" }));
  if (l) { console.log(' notifications', got); await l.end(); }
}
await c.query('DROP TABLE public._t');
await c.end();
