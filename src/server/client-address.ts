/**
 * The address of the client a request comes from, for the limits kept per address (failed
 * authentications, requests a minute without an API key): the socket's peer. X-Forwarded-For is
 * believed only from a trusted proxy (`trustedProxies`): then the client is the last address in it
 * that is not itself a trusted proxy. Proxies append the address they saw; whatever comes before
 * was written by the client, who could otherwise take a new address at every request.
 */
export type ClientAddress = (c: { env: unknown; req: { header(name: string): string | undefined } }) => string;

/** `::ffff:127.0.0.1` (an IPv4 peer of an IPv6 socket) as `127.0.0.1`. */
const plain = (address: string): string => {
  const a = address.trim();
  return /^::ffff:\d+\.\d+\.\d+\.\d+$/i.test(a) ? a.slice(7) : a;
};

export function clientAddressOf(trustedProxies: readonly string[] = []): ClientAddress {
  const trusted = new Set(trustedProxies.map(plain));
  return (c) => {
    const peer = (c.env as { incoming?: { socket?: { remoteAddress?: string } } } | undefined)?.incoming?.socket
      ?.remoteAddress;
    const socket = peer === undefined ? 'unknown' : plain(peer);
    if (!trusted.has(socket)) return socket;
    const hops = (c.req.header('x-forwarded-for') ?? '')
      .split(',')
      .map(plain)
      .filter((a) => a !== '');
    for (let i = hops.length - 1; i >= 0; i--) if (!trusted.has(hops[i]!)) return hops[i]!;
    return socket;
  };
}
