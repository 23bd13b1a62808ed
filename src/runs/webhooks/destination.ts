import { lookup } from 'node:dns/promises';
import { BlockList, isIP } from 'node:net';

/**
 * Where a webhook may be sent: not to this machine or a private network unless allowed (a tenant
 * must not make the server reach what only the server can reach: its database, a metadata
 * service, a neighbour's admin port). Checked when a subscription is made (a literal address or
 * `localhost`) and at every attempt: the host is resolved once, every answer is checked, and the
 * connection goes to the address checked (see `resolveDestination`), so a name that answers
 * differently the next time (DNS rebinding) cannot slip past the check.
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
  ['100::', 64], // discard
  ['2001:db8::', 32], // documentation
  ['64:ff9b:1::', 48], // local-use NAT64 (RFC 8215): a private translator, whatever it embeds
  ['fc00::', 7], // unique local
  ['fe80::', 10], // link-local
  ['fec0::', 10], // site-local (deprecated)
  ['ff00::', 8], // multicast
] as const) {
  PRIVATE.addSubnet(net, prefix, 'ipv6');
}

/** The eight 16-bit groups of an IPv6 address (any notation, embedded IPv4 included), or undefined. */
function hextets(address: string): number[] | undefined {
  let canonical: string;
  try {
    // The URL parser writes an IPv6 address in one canonical form: hex groups, one `::` at most.
    canonical = new URL(`http://[${address}]/`).hostname.slice(1, -1);
  } catch {
    return undefined;
  }
  const [head, tail] = canonical.split('::') as [string, string | undefined];
  const part = (s: string | undefined) => (s ? s.split(':').map((h) => parseInt(h, 16)) : []);
  const left = part(head);
  const right = part(tail);
  return tail === undefined ? left : [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

const ipv4Of = (hi: number, lo: number): string => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;

/**
 * The IPv4 addresses an IPv6 address stands for (a packet to it may reach them): IPv4-mapped
 * (::ffff:a.b.c.d), IPv4-translated (::ffff:0:a.b.c.d), IPv4-compatible (::a.b.c.d), NAT64's
 * well-known prefix (64:ff9b::/96), 6to4 (2002::/16) and Teredo (2001::/32: its server, and its
 * client, stored inverted).
 */
function embeddedIpv4(h: number[]): string[] {
  const zero = (from: number, to: number) => h.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && h[5] === 0xffff) return [ipv4Of(h[6]!, h[7]!)];
  if (zero(0, 4) && h[4] === 0xffff && h[5] === 0) return [ipv4Of(h[6]!, h[7]!)];
  if (zero(0, 6)) return [ipv4Of(h[6]!, h[7]!)];
  if (h[0] === 0x64 && h[1] === 0xff9b && zero(2, 6)) return [ipv4Of(h[6]!, h[7]!)];
  if (h[0] === 0x2002) return [ipv4Of(h[1]!, h[2]!)];
  if (h[0] === 0x2001 && h[1] === 0) return [ipv4Of(h[2]!, h[3]!), ipv4Of(~h[6]! & 0xffff, ~h[7]! & 0xffff)];
  return [];
}

/**
 * Whether an IP address is this machine's, a private network's, or otherwise not public. An IPv6
 * address that embeds an IPv4 address (NAT64, 6to4, Teredo, IPv4-compatible or -mapped) is as
 * private as what it embeds; local-use NAT64 (64:ff9b:1::/48) is refused whatever it embeds. What
 * is not an address (a scoped `fe80::1%eth0` included) is not public.
 */
export function isPrivateAddress(address: string): boolean {
  const family = isIP(address);
  if (family === 4) return PRIVATE.check(address, 'ipv4');
  if (family !== 6 || address.includes('%')) return true;
  const h = hextets(address);
  if (!h || h.length !== 8) return true;
  const canonical = h.map((x) => x.toString(16)).join(':');
  return PRIVATE.check(canonical, 'ipv6') || embeddedIpv4(h).some((v4) => PRIVATE.check(v4, 'ipv4'));
}

/** The URL's host as written, without IPv6 brackets or a trailing dot (`localhost.` is localhost). */
const hostOf = (url: string): string =>
  new URL(url).hostname
    .replace(/^\[(.*)\]$/, '$1')
    .replace(/\.$/, '')
    .toLowerCase();

/** Why a subscription's URL is refused as it is written (a private literal address, localhost), or undefined. */
export function privateUrlReason(url: string): string | undefined {
  const host = hostOf(url);
  if (host === 'localhost' || host.endsWith('.localhost')) return `${host} is this machine`;
  if (isIP(host) !== 0 && isPrivateAddress(host)) return `${host} is a private or local address`;
  return undefined;
}

/** An address a host name resolves to. */
export interface ResolvedAddress {
  address: string;
  family: 4 | 6;
}

/** Resolves a host name to all its addresses (the system resolver by default; tests inject one). */
export type Resolve = (host: string) => Promise<ResolvedAddress[]>;

export const systemResolve: Resolve = async (host) =>
  (await lookup(host, { all: true, verbatim: true })).map((a) => ({
    address: a.address,
    family: a.family === 6 ? 6 : 4,
  }));

/** A delivery refused before any connection: its destination is private. */
export class RefusedDestinationError extends Error {
  constructor(reason: string) {
    super(`refused: ${reason}`);
    this.name = 'RefusedDestinationError';
  }
}

/**
 * The one address an attempt connects to: the URL's literal address, or the first answer for its
 * host name, resolved once. Unless private networks are allowed, refused (RefusedDestinationError)
 * when the URL is private as written or when **any** answer is private (a name that answers a
 * public and a private address could be reached at either).
 */
export async function resolveDestination(
  url: string,
  o: { allowPrivateNetworks: boolean; resolve: Resolve },
): Promise<ResolvedAddress> {
  const host = hostOf(url);
  if (!o.allowPrivateNetworks) {
    const literal = privateUrlReason(url);
    if (literal) throw new RefusedDestinationError(literal);
  }
  const family = isIP(host);
  if (family !== 0) return { address: host, family: family === 6 ? 6 : 4 };
  const answers = await o.resolve(host);
  if (answers.length === 0) throw Object.assign(new Error(`${host} has no address`), { code: 'ENOTFOUND' });
  const bad = o.allowPrivateNetworks ? undefined : answers.find((a) => isPrivateAddress(a.address));
  if (bad) throw new RefusedDestinationError(`${host} resolves to ${bad.address}, a private or local address`);
  return answers[0]!;
}
