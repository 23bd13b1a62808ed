/**
 * A worker process of the database-restart test: `node restart-worker.ts <url> <schema> <ledger> <n>`.
 * It executes runs like any `keel worker`, sends 'ready' over IPC, and stops gracefully on 'stop'.
 */
import { createRuntime } from '../../src/index.ts';
import { PostgresStore } from '../../src/store/postgres/index.ts';
import { RESTART_RUNTIME, restartAgent } from './restart-agent.ts';

const [url, schema, ledger, n] = process.argv.slice(2) as [string, string, string, string];
const store = new PostgresStore({ url, schema, poolSize: 6 });
await store.opened();
const rt = createRuntime({ store, agents: [restartAgent(ledger)], ...RESTART_RUNTIME });
const worker = rt.startWorker({ id: `restart-worker-${n}`, concurrency: 30, pollMs: 100 });
process.on('message', (m) => {
  if (m !== 'stop') return;
  void worker
    .stop({ graceMs: 2000 })
    .then(() => rt.close({ graceMs: 0 }))
    .then(() => store.close())
    .then(() => process.exit(0));
});
process.send!('ready');
