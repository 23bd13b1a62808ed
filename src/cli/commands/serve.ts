import { loadConfig } from '../../config/index.ts';
import { startServer } from '../../server/serve.ts';
import { args, line, type Io } from '../args.ts';
import { commandLogger, openDb } from '../common.ts';
import { version } from '../version.ts';

export const serveHelp = `keel serve [--port 8787] [--host 127.0.0.1] [--db PATH|URL] [--config FILE] [--workers N] [--insecure] [--log-level info] [--trusted-proxies ADDR,...]
  The HTTP API and a worker in one process, on embedded SQLite (./.keel/keel.db, or $KEEL_DB), or on
  PostgreSQL with --db postgres://user@host/db (or KEEL_DB=postgres://…; schema $KEEL_DB_SCHEMA, default keel;
  behind PgBouncer in transaction mode KEEL_DB_POOLER=transaction and KEEL_DB_LISTEN_URL; pool size, timeouts
  and slow statements: $KEEL_DB_POOL_SIZE, $KEEL_DB_STATEMENT_TIMEOUT_MS, $KEEL_DB_LOCK_TIMEOUT_MS,
  $KEEL_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS, $KEEL_DB_SLOW_QUERY_MS: docs/deployment.md).
  --workers 0 serves the API only (run "keel worker" elsewhere). /metrics asks for the bearer token
  in $KEEL_METRICS_TOKEN when it is set, else for an API key once keys exist. Logs (requests, runs,
  failures) go to stderr as JSON lines, readable on a terminal; --log-level (or $KEEL_LOG_LEVEL):
  fatal, error, warn, info (default), debug, trace, silent. Webhooks may go to private networks
  (loopback, 10/8, 192.168/16…) only from a server on a loopback address, or with
  KEEL_WEBHOOKS_ALLOW_PRIVATE=1. Limits kept per client address (failed authentications, callback
  URLs) use the socket's peer; behind reverse proxies, --trusted-proxies (or $KEEL_TRUSTED_PROXIES)
  lists their addresses, comma-separated: from them, the client is the last address in
  X-Forwarded-For that is not a trusted proxy. X-Forwarded-For from anyone else is ignored.`;

export async function serveCommand(argv: string[], io: Io): Promise<number> {
  const { values } = args('serve', argv, {
    port: { type: 'string' },
    host: { type: 'string' },
    db: { type: 'string' },
    config: { type: 'string' },
    workers: { type: 'string' },
    insecure: { type: 'boolean' },
    'log-level': { type: 'string' },
    'trusted-proxies': { type: 'string' },
  });
  const logger = commandLogger(io, values['log-level']);
  const rawPort = values.port ?? io.env.PORT ?? '8787';
  // Digits only: Number('') and Number(' ') are 0, which would listen on a random port.
  const port = /^\d+$/.test(rawPort) ? Number(rawPort) : NaN;
  if (!Number.isInteger(port) || port < 0 || port > 65535)
    throw new Error(
      `--port must be 0-65535, not ${JSON.stringify(rawPort)}${values.port === undefined ? ' (from $PORT)' : ''}`,
    );
  const workers = values.workers !== undefined ? Number(values.workers) : 8;
  if (!Number.isInteger(workers) || workers < 0)
    throw new Error(`--workers must be a whole number >= 0, not ${values.workers}`);
  const proxies = values['trusted-proxies'] ?? io.env.KEEL_TRUSTED_PROXIES;
  const trustedProxies = proxies === undefined ? [] : proxies.split(',').map((a) => a.trim());
  if (trustedProxies.some((a) => a === ''))
    throw new Error(
      `--trusted-proxies must be addresses separated by commas, not ${JSON.stringify(proxies)}${values['trusted-proxies'] === undefined ? ' (from $KEEL_TRUSTED_PROXIES)' : ''}`,
    );
  const config = await loadConfig(values.config);
  const { store, where } = await openDb(io, values.db, { create: true, logger });
  let server: Awaited<ReturnType<typeof startServer>>;
  try {
    server = await startServer({
      store,
      config,
      port,
      host: values.host ?? '127.0.0.1',
      workers,
      insecure: values.insecure ?? false,
      version,
      logger,
      trustedProxies,
      ...(io.env.KEEL_WEBHOOKS_ALLOW_PRIVATE === '1' ? { webhooks: { allowPrivateNetworks: true } } : {}),
      ...(io.env.KEEL_METRICS_TOKEN ? { metricsToken: io.env.KEEL_METRICS_TOKEN } : {}),
    });
  } catch (e) {
    // Refused (a non-loopback host without keys) or could not listen: do not leave the database open.
    await store.close();
    throw e;
  }
  line(
    io,
    `keel ${version} listening on ${server.url}  (database ${where}, ${workers > 0 ? `worker concurrency ${workers}` : 'no worker'}, auth ${server.auth === 'required' ? 'by API key' : 'off (loopback)'})`,
  );
  if (config.demo) {
    line(io, '');
    line(
      io,
      'DEMO MODE: no keel.config.{ts,mjs,js,json} here, so this serves the built-in demo agent on a scripted model',
    );
    line(io, '(no API keys, no network). It shows a tool call, an approval and an ask_user question. Try:');
    line(io, `  curl -s -XPOST ${server.url}/v1/sessions -H 'content-type: application/json' -d '{}'`);
    line(io, `  npx keel chat --url ${server.url}`);
    line(io, 'To use a real model, create keel.config.json, e.g.');
    line(
      io,
      '  {"agents":[{"name":"assistant","model":"openai:gpt-4.1-mini","system":"You are helpful.","tools":["ask_user"]}]}',
    );
    line(io, 'and set OPENAI_API_KEY (or anthropic:/google:/openai-compatible:<baseURL>#<model> with their keys).');
  } else {
    line(
      io,
      `agents from ${config.source}: ${config.agents.map((a) => `${a.name}@${a.version} (${a.model.provider}:${a.model.modelId})`).join(', ')}`,
    );
  }
  // An abort that came while starting up would never fire its event again.
  if (!io.signal.aborted)
    await new Promise<void>((resolve) => io.signal.addEventListener('abort', () => resolve(), { once: true }));
  line(io, 'shutting down: handing runs back to the queue…');
  await server.close({ graceMs: 10_000 });
  await store.close();
  return 0;
}
