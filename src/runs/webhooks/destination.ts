import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent: not to this machine or a private network unless allowed (a tenant
 * must not make the server reach what only the server can reach: its database, a metadata
 * service, a neighbour's admin port). Checked when a subscription is made (a literal address or
 * `localhost`) and before every attempt (what its host name resolves to now).
 */
const PRIVATE = new BlockList();
for (const [net, prefix] of [
  ['0.0.0.0', 8], // "this" network
  ['10.0.0.0', 8],
  ['100.64.0.0', 10], // carrier-grade NAT
  ['127.0.0.0', 8],
  ['169.254.0.0', 16], // link-local, cloud metadata services
  ['172.16.0.0', 12],
  ['192.0.0.0', 24],
  ['192.168.0.0', 16],
  ['198.18.0.0', 15], // benchmarking
  ['224.0.0.0', 4], // multicast
  ['240.0.0.0', 4], // reserved, broadcast
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv4');
}
for (const [net, prefix] of [
  ['::', 128],
  ['::1', 128],
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['ff00::', 8], // multicast
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv6');
}

/** Whether an IP address is this machine's, a private network's, or otherwise not public. */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family !== 6) return true;
  // An IPv4 address written as IPv6 (::ffff:10.0.0.1) is that IPv4 address.
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)?.[1];
  return mapped !== undefined ? PRIVATE.check(mapped, 'ipv4') : PRIVATE.check(address, 'ipv6');
}

const hostOf = (url: string): string => new URL(url).hostname.replace(/^\[(.*)\]$/, '$1');

/** Why a subscription's URL is refused as it is written (a private literal address, localhost), or undefined. */
export function privateUrlReason(url: string): string | undefined {
  const host = hostOf(url).toLowerCase();
  if (host === 'localhost' || host.endsWith('.localhost')) return `${host} is this machine`;
  if (isIP(host) !== 0 && isPrivateAddress(host)) return `${host} is a private or local address`;
  return undefined;
}

/** Why a delivery to `url` is refused now (its host resolves to a private address), or undefined. */
export async function privateDestinationReason(url: string): Promise<string | undefined> {
  const literal = privateUrlReason(url);
  if (literal) return literal;
  const host = hostOf(url);
  if (isIP(host) !== 0) return undefined;
  let addresses: Array<{ address: string }>;
  try {
    addresses = await lookup(host, { all: true, verbatim: true });
  } catch {
    // Not resolvable: the attempt fails on its own, as any unreachable receiver.
    return undefined;
  }
  const bad = addresses.find((a) => isPrivateAddress(a.address));
  return bad ? `${host} resolves to ${bad.address}, a private or local address` : undefined;
}
