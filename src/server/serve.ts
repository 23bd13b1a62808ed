import type { AddressInfo } from 'node:net';
import { serve, type ServerType } from '@hono/node-server';
import { modelResolverFor, type LoadedConfig } from '../config/index.ts';
import { createRuntime, type Runtime, type WebhookOptions } from '../runs/index.ts';
import type { RetentionOptions } from '../retention/index.ts';
import type { Store } from '../store/index.ts';
import { createApp, type ServerOptions } from './app.ts';

export interface StartOptions extends Omit<ServerOptions, 'runtime' | 'auth'> {
  store: Store;
  config: LoadedConfig;
  port?: number;
  host?: string;
  /** Run workers in this process (0: API only). Their concurrency. */
  workers?: number;
  /** Allow a non-loopback address without API keys. */
  insecure?: boolean;
  leaseMs?: number;
  /** Webhook deliveries (docs/webhooks.md); private networks are allowed by default only on a loopback address. */
  webhooks?: WebhookOptions;
  /** Retention (docs/operations.md): instead of the configuration's. */
  retention?: RetentionOptions;
}

export interface RunningServer {
  url: string;
  port: number;
  runtime: Runtime;
  auth: 'required' | 'off';
  /** Stops accepting connections, lets workers hand their runs back, closes open streams. */
  close(options?: { graceMs?: number }): Promise<void>;
}

export const isLoopback = (host: string): boolean => host === 'localhost' || host === '::1' || host.startsWith('127.');

export class InsecureBindError extends Error {
  constructor(host: string) {
    super(
      `refusing to listen on ${host} without API keys: create one with "keel keys create <tenant>", or pass --insecure to serve everyone as one tenant`,
    );
    this.name = 'InsecureBindError';
  }
}

/** The API and (by default) a worker in one process. */
export async function startServer(o: StartOptions): Promise<RunningServer> {
  const host = o.host ?? '127.0.0.1';
  const keys = (await o.store.keys.list()).filter((k) => k.revokedAt === null);
  if (keys.length === 0 && !isLoopback(host) && !o.insecure) throw new InsecureBindError(host);
  const auth = keys.length > 0 ? 'required' : 'off';

  const runtime = createRuntime({
    store: o.store,
    agents: o.config.agents,
    compaction: o.config.compaction,
    resolveModel: modelResolverFor(o.config),
    ...(o.config.scorers ? { scorers: o.config.scorers } : {}),
    ...(o.config.providerLimits ? { limits: o.config.providerLimits } : {}),
    ...(o.config.priorities ? { priorities: o.config.priorities } : {}),
    ...(o.config.quotas ? { quotas: o.config.quotas } : {}),
    ...(o.config.largePayloads ? { largePayloads: o.config.largePayloads } : {}),
    ...(o.retention ? { retention: o.retention } : o.config.retention ? { retention: o.config.retention } : {}),
    ...(o.leaseMs !== undefined ? { leaseMs: o.leaseMs } : {}),
    // A server only this machine can reach may send webhooks to it (a developer's receiver);
    // one on a network may not, unless told (a tenant must not reach what only the server can).
    webhooks: { allowPrivateNetworks: isLoopback(host), ...o.webhooks },
  });
  if ((o.workers ?? 8) > 0) runtime.startWorker({ concurrency: o.workers ?? 8 });
  // Webhook deliveries go out from every API process too, with or without workers.
  runtime.webhooks.startDispatcher();
  const { app, close: closeApp } = createApp({ ...o, runtime, auth });

  let server: ServerType;
  try {
    server = await new Promise((resolve, reject) => {
      const s = serve({ fetch: app.fetch, port: o.port ?? 8787, hostname: host }, () => resolve(s));
      s.once('error', reject);
    });
  } catch (e) {
    // Could not listen (the port is taken...): nothing of this server may keep running.
    await runtime.close({ graceMs: 0 });
    closeApp();
    throw e;
  }
  const port = (server.address() as AddressInfo).port;
  const shownHost = host.includes(':') ? `[${host}]` : host;
  return {
    url: `http://${shownHost}:${port}`,
    port,
    runtime,
    auth,
    async close(options = {}) {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        // Open streams would hold close() forever: end them; clients resume elsewhere or later.
        (server as unknown as { closeAllConnections?: () => void }).closeAllConnections?.();
      });
      // Its workers (runs handed back), its scheduler and its webhook deliveries stop.
      await runtime.close(options);
      closeApp();
    },
  };
}
