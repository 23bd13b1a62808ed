/** A real HTTP receiver for webhook tests (node:http on 127.0.0.1), answering as the test says. */
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface Received {
  headers: IncomingHttpHeaders;
  body: string;
  status: number;
}

export class Receiver {
  readonly received: Received[] = [];
  /** The status to answer with (the next one of the queue, else `status`). */
  status = 200;
  readonly queue: number[] = [];
  delayMs = 0;
  /** Never answer: requests are held open (until the client gives up or `stop`). */
  hold = false;
  /** Requests being held now, and the most held at once. */
  holding = 0;
  maxHolding = 0;
  private server: Server | undefined;
  port = 0;

  get url(): string {
    return `http://127.0.0.1:${this.port}/hook`;
  }

  async start(port = 0): Promise<this> {
    const server = createServer((req, res) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => {
        if (this.hold) {
          this.holding++;
          this.maxHolding = Math.max(this.maxHolding, this.holding);
          res.on('close', () => this.holding--);
          return;
        }
        const status = this.queue.shift() ?? this.status;
        const answer = () => {
          this.received.push({ headers: req.headers, body: Buffer.concat(chunks).toString('utf8'), status });
          res.writeHead(status, { 'content-type': 'text/plain' }).end('ok');
        };
        if (this.delayMs > 0) setTimeout(answer, this.delayMs);
        else answer();
      });
    });
    await new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => resolve());
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

  /** Waits until `n` requests came (or fails after `ms`). */
  async until(n: number, ms = 5000): Promise<void> {
    const end = Date.now() + ms;
    while (this.received.length < n) {
      if (Date.now() > end) throw new Error(`the receiver got ${this.received.length} requests, not ${n}`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}
