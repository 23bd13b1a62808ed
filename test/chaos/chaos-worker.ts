/**
 * A worker process of the chaos test: `node chaos-worker.ts <backend JSON> <ledger> <generation>`.
 * It executes runs, sweeps waits, fires schedules and delivers webhooks, like any `keel worker`.
 * IPC to the parent: 'ready', then 'busy' when a tool first runs; 'stop' from the parent stops it
 * gracefully (the chaos test mostly kills it with SIGKILL instead).
 */
import { createRuntime } from '../../src/index.ts';
import { CHAOS_PROCESS, CHAOS_RUNTIME, CHAOS_SWEEP_MS, chaosAgent } from './chaos-agent.ts';
import { openChaosStore, type ChaosBackend } from './chaos-db.ts';

const [backendArg, ledgerPath, genArg] = process.argv.slice(2) as [string, string, string];
const gen = Number(genArg);
let busy = false;
const store = await openChaosStore(JSON.parse(backendArg) as ChaosBackend);
const agent = chaosAgent(
  ledgerPath,
  gen,
  () => {
    if (!busy) {
      busy = true;
      process.send?.('busy');
    }
  },
  { modelDelayMs: 150 },
);
const rt = createRuntime({ store, agents: [agent], ...CHAOS_RUNTIME, ...CHAOS_PROCESS });
const worker = rt.startWorker({ id: `chaos-${gen}`, concurrency: 6, pollMs: 50, sweepMs: CHAOS_SWEEP_MS });
process.on('message', (m) => {
  if (m !== 'stop') return;
  void worker
    .stop({ graceMs: 2000 })
    .then(() => rt.close({ graceMs: 0 }))
    .then(() => store.close())
    .then(() => process.exit(0));
});
process.send?.('ready');
