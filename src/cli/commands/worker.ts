import { loadConfig } from '../../config/index.ts';
import { createRuntime } from '../../runs/index.ts';
import { args, line, type Io } from '../args.ts';
import { openDb } from '../common.ts';

export const workerHelp = `keel worker [--db PATH|URL] [--config FILE] [--concurrency N]
  A worker only: claims queued runs from the database (a SQLite file on this machine, or PostgreSQL
  shared by many machines: --db postgres://…) and executes them.`;

export async function workerCommand(argv: string[], io: Io): Promise<number> {
  const { values } = args('worker', argv, { db: { type: 'string' }, config: { type: 'string' }, concurrency: { type: 'string' } });
  const concurrency = values.concurrency !== undefined ? Number(values.concurrency) : 8;
  if (!Number.isInteger(concurrency) || concurrency < 1) throw new Error(`--concurrency must be a whole number >= 1, not ${values.concurrency}`);
  const config = await loadConfig(values.config);
  const { store, where } = await openDb(io, values.db, { create: true });
  const rt = createRuntime({ store, agents: config.agents, compaction: config.compaction });
  const worker = rt.startWorker({ concurrency });
  line(io, `keel worker ${worker.id} on ${where}, concurrency ${concurrency}${config.demo ? ' (demo agent)' : ''}`);
  await new Promise<void>((resolve) => io.signal.addEventListener('abort', () => resolve(), { once: true }));
  line(io, 'stopping: handing runs back to the queue…');
  await worker.stop({ graceMs: 10_000 });
  await store.close();
  return 0;
}
