/**
 * A worker process of the chaos test: `node chaos-worker.ts <db> <ledger> <generation>`. IPC to
 * the parent: 'ready', then 'busy' when a tool first runs; 'stop' from the parent stops it
 * gracefully (the chaos test mostly kills it with SIGKILL instead).
 */
import { createRuntime, SqliteStore } from '../../src/index.ts';
import { CHAOS_RUNTIME, chaosAgent } from './chaos-agent.ts';

const [dbPath, ledgerPath, genArg] = process.argv.slice(2) as [string, string, string];
const gen = Number(genArg);
let busy = false;
const store = new SqliteStore({ path: dbPath, busyTimeoutMs: 30_000 });
const agent = chaosAgent(ledgerPath, gen, () => {
  if (!busy) {
    busy = true;
    process.send?.('busy');
  }
});
const rt = createRuntime({ store, agents: [agent], ...CHAOS_RUNTIME });
const worker = rt.startWorker({ id: `chaos-${gen}`, concurrency: 6, pollMs: 50 });
process.on('message', (m) => {
  if (m !== 'stop') return;
  void worker
    .stop({ graceMs: 2000 })
    .then(() => rt.close({ graceMs: 0 }))
    .then(() => store.close())
    .then(() => process.exit(0));
});
process.send?.('ready');
