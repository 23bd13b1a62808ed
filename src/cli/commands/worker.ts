import { loadConfig, modelResolverFor } from '../../config/index.ts';
import { instrumentRuntime, serveMetrics } from '../../monitoring/index.ts';
import { createRuntime } from '../../runs/index.ts';
import { args, line, type Io } from '../args.ts';
import { commandLogger, openDb } from '../common.ts';

export const workerHelp = `keel worker [--db PATH|URL] [--config FILE] [--concurrency N] [--metrics-port P] [--metrics-host H] [--log-level info]
  A worker only: claims queued runs from the database (a SQLite file on this machine, or PostgreSQL
  shared by many machines: --db postgres://…) and executes them. --metrics-port serves Prometheus
  metrics at http://H:P/metrics (host 127.0.0.1 by default; bearer token $KEEL_METRICS_TOKEN when
  set). Logs go to stderr (see keel serve). Its webhook deliveries go to private networks only with
  KEEL_WEBHOOKS_ALLOW_PRIVATE=1.`;

export async function workerCommand(argv: string[], io: Io): Promise<number> {
  const { values } = args('worker', argv, {
    db: { type: 'string' },
    config: { type: 'string' },
    concurrency: { type: 'string' },
    'metrics-port': { type: 'string' },
    'metrics-host': { type: 'string' },
    'log-level': { type: 'string' },
  });
  const concurrency = values.concurrency !== undefined ? Number(values.concurrency) : 8;
  if (!Number.isInteger(concurrency) || concurrency < 1)
    throw new Error(`--concurrency must be a whole number >= 1, not ${values.concurrency}`);
  const rawPort = values['metrics-port'];
  const metricsPort =
    rawPort !== undefined && /^\d+$/.test(rawPort) ? Number(rawPort) : rawPort === undefined ? undefined : NaN;
  if (metricsPort !== undefined && !(metricsPort >= 0 && metricsPort <= 65535))
    throw new Error(`--metrics-port must be 0-65535, not ${JSON.stringify(rawPort)}`);
  const logger = commandLogger(io, values['log-level']);
  const config = await loadConfig(values.config);
  const { store, where } = await openDb(io, values.db, { create: true, logger });
  const rt = createRuntime({
    store,
    agents: config.agents,
    compaction: config.compaction,
    resolveModel: modelResolverFor(config),
    ...(config.scorers ? { scorers: config.scorers } : {}),
    ...(config.providerLimits ? { limits: config.providerLimits } : {}),
    ...(config.quotas ? { quotas: config.quotas } : {}),
    ...(config.priorities ? { priorities: config.priorities } : {}),
    ...(config.largePayloads ? { largePayloads: config.largePayloads } : {}),
    ...(config.retention ? { retention: config.retention } : {}),
    webhooks: { allowPrivateNetworks: io.env.KEEL_WEBHOOKS_ALLOW_PRIVATE === '1' },
  });
  const telemetry = instrumentRuntime(rt, { logger });
  let metrics: Awaited<ReturnType<typeof serveMetrics>> | undefined;
  try {
    if (metricsPort !== undefined) {
      metrics = await serveMetrics(telemetry.metrics, {
        port: metricsPort,
        ...(values['metrics-host'] ? { host: values['metrics-host'] } : {}),
        ...(io.env.KEEL_METRICS_TOKEN ? { token: io.env.KEEL_METRICS_TOKEN } : {}),
      });
    }
  } catch (e) {
    telemetry.stop();
    await store.close();
    throw e;
  }
  const worker = rt.startWorker({ concurrency });
  line(
    io,
    `keel worker ${worker.id} on ${where}, concurrency ${concurrency}${config.demo ? ' (demo agent)' : ''}${metrics ? `, metrics at ${metrics.url}` : ''}`,
  );
  await new Promise<void>((resolve) => io.signal.addEventListener('abort', () => resolve(), { once: true }));
  line(io, 'stopping: handing runs back to the queue…');
  // The worker (its runs handed back), the scheduler and webhook deliveries stop.
  await rt.close({ graceMs: 10_000 });
  await metrics?.close();
  telemetry.stop();
  await store.close();
  return 0;
}
