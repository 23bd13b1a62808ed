/**
 * The chaos test's webhook receiver: a real HTTP server in the driver process that records every
 * request by its delivery id (`Keel-Delivery`), checks its signature, and answers slowly or with a
 * 500 now and then (while `flaky`), so that deliveries are retried and attempts are in flight when
 * workers die.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { verifyWebhookSignature } from '../../src/index.ts';

export interface ReceivedDelivery {
  deliveryId: string;
  event: string;
  body: string;
  signed: boolean;
  status: number;
}

export class ChaosReceiver {
  readonly received: ReceivedDelivery[] = [];
  /** The subscription's secret, once it is known (until then no signature can be checked). */
  secret: string | undefined;
  /** Answer a 500 to one request in ten, and some slowly. */
  flaky = true;
  private server: Server | undefined;
  private port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async start(): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        const body = Buffer.concat(chunks).toString('utf8');
        const status = this.flaky && Math.random() < 0.1 ? 500 : 204;
        const signed =
          this.secret !== undefined &&
          verifyWebhookSignature(this.secret, String(req.headers['keel-signature'] ?? ''), body, 300);
        this.received.push({
          deliveryId: String(req.headers['keel-delivery'] ?? ''),
          event: String(req.headers['keel-event'] ?? ''),
          body,
          signed,
          status,
        });
        setTimeout(() => res.writeHead(status).end(), this.flaky ? Math.floor(Math.random() * 40) : 0);
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(0, '127.0.0.1', () => resolve());
    });
    this.server = server;
    this.port = (server.address() as AddressInfo).port;
    return this;
  }

  async stop(): Promise<void> {
    const s = this.server;
    this.server = undefined;
    if (!s) return;
    s.closeAllConnections();
    await new Promise<void>((resolve) => s.close(() => resolve()));
  }
}
