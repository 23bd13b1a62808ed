import { timingSafeEqual } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { KeelMetrics } from './metrics.ts';

/**
 * `/metrics` on a port of its own, for a process without the HTTP API (`keel worker`): the
 * Prometheus text, behind a bearer token when one is given; 404 for any other path.
 */
export async function serveMetrics(
  metrics: KeelMetrics,
  o: { port: number; host?: string; token?: string },
): Promise<{ url: string; close(): Promise<void> }> {
  const server: Server = createServer((req, res) => {
    void (async () => {
      if (req.method !== 'GET' || (req.url ?? '').split('?')[0] !== '/metrics') {
        res.writeHead(404, { 'content-type': 'text/plain' }).end('only GET /metrics here\n');
        return;
      }
      if (o.token) {
        const sent = Buffer.from(/^Bearer\s+(\S+)$/i.exec(req.headers.authorization ?? '')?.[1] ?? '');
        const want = Buffer.from(o.token);
        if (sent.length !== want.length || !timingSafeEqual(sent, want)) {
          res
            .writeHead(401, { 'content-type': 'text/plain', 'www-authenticate': 'Bearer' })
            .end('send the metrics token as "Authorization: Bearer <token>"\n');
          return;
        }
      }
      try {
        const { body, contentType } = await metrics.render();
        res.writeHead(200, { 'content-type': contentType }).end(body);
      } catch (e) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end(`metrics unavailable: ${(e as Error).message}\n`);
      }
    })();
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(o.port, o.host ?? '127.0.0.1', () => resolve());
  });
  const { port } = server.address() as AddressInfo;
  const host = o.host ?? '127.0.0.1';
  return {
    url: `http://${host.includes(':') ? `[${host}]` : host}:${port}/metrics`,
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}
