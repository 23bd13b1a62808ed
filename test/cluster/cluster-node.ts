/**
 * One node of the cluster test: `node cluster-node.ts api|worker <postgres url> <schema> <ledger> <n> [<store options JSON>]`.
 * An `api` node serves the HTTP API without workers and sends `{ url }` over IPC; a `worker` node
 * executes runs and sends 'ready'. Both run the chaos agent (narrated: it streams text deltas), and
 * share nothing but the PostgreSQL schema. 'stop' over IPC stops a node gracefully; the test
 * mostly kills workers with SIGKILL instead.
 */
import { createRuntime } from '../../src/index.ts';
import { startServer } from '../../src/server/serve.ts';
import { PostgresStore } from '../../src/store/postgres/index.ts';
import { CHAOS_RUNTIME, chaosAgent } from '../chaos/chaos-agent.ts';

const [role, url, schema, ledger, nArg, more] = process.argv.slice(2) as [
  'api' | 'worker',
  string,
  string,
  string,
  string,
  string | undefined,
];
const n = Number(nArg);
const store = new PostgresStore({ url, schema, poolSize: 8, ...(JSON.parse(more ?? '{}') as object) });
await store.opened();
const agent = chaosAgent(ledger, n, undefined, { narrate: true });
const config = { source: null, agents: [agent], compaction: {}, demo: false };

if (role === 'api') {
  const server = await startServer({ store, config, port: 0, workers: 0, version: 'cluster', ...CHAOS_RUNTIME });
  process.send!({ url: server.url });
  process.on('message', (m) => {
    if (m === 'stop')
      void server
        .close({ graceMs: 500 })
        .then(() => store.close())
        .then(() => process.exit(0));
  });
} else {
  const rt = createRuntime({ store, agents: [agent], ...CHAOS_RUNTIME });
  const worker = rt.startWorker({ id: `cluster-worker-${n}`, concurrency: 8, pollMs: 50 });
  process.send!('ready');
  process.on('message', (m) => {
    if (m !== 'stop') return;
    void worker
      .stop({ graceMs: 2000 })
      .then(() => rt.close({ graceMs: 0 }))
      .then(() => store.close())
      .then(() => process.exit(0));
  });
}
