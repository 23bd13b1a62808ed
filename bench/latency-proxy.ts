/**
 * A TCP proxy that delays every chunk by a fixed time in each direction: PostgreSQL as if it were
 * across a network, for measuring what round trips cost (the loopback's own is ~0.07 ms here).
 * Order is kept (timers of one delay fire in the order they were set).
 *
 *   node bench/latency-proxy.ts [listenPort=6433] [target=127.0.0.1:5432] [delayMs=1]
 *
 * then point a benchmark at it, e.g. KEEL_BENCH_DATABASE_URL=postgres://postgres@127.0.0.1:6433/test
 * PARTS=c npm run bench:cluster. Node's timers have a resolution of 1 ms: a delay of 1 ms each way
 * makes a round trip of 2 ms or a little more, about that of a database in another availability zone.
 */
import net from 'node:net';

const [listenPort = '6433', target = '127.0.0.1:5432', delay = '1'] = process.argv.slice(2);
const [host, port] = target.split(':') as [string, string];
const delayMs = Number(delay);
if (!(delayMs >= 0)) throw new Error(`latency-proxy: a delay in ms, not ${delay}`);

const server = net.createServer((client) => {
  client.setNoDelay(true);
  const upstream = net.connect({ host, port: Number(port) });
  upstream.setNoDelay(true);
  const relay = (from: net.Socket, to: net.Socket) => {
    from.on('data', (chunk) => setTimeout(() => to.write(chunk), delayMs));
    from.on('end', () => setTimeout(() => to.end(), delayMs));
    from.on('error', () => to.destroy());
    from.on('close', () => setTimeout(() => to.destroy(), delayMs));
  };
  relay(client, upstream);
  relay(upstream, client);
});
server.listen(Number(listenPort), '127.0.0.1', () => {
  console.log(`latency-proxy: 127.0.0.1:${listenPort} → ${target}, ${delayMs} ms each way`);
});
