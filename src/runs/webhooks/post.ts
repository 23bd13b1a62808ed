import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
import type { LookupFunction } from 'node:net';
import type { ResolvedAddress } from './destination.ts';

/**
 * POSTs a delivery to `url`, connected to exactly `to` (the address the destination check
 * resolved and checked), whatever the URL's host resolves to by now: the request's `lookup`
 * answers `to` and nothing else. The Host header and the TLS server name (SNI, and the name the
 * certificate must show) stay the URL's host. No connection is reused (an agent per request): a
 * pooled one could have been opened to an address checked under other rules. Redirects are not
 * followed. Resolves to the response's status (its body is discarded).
 */
export function postWebhook(
  url: string,
  to: ResolvedAddress,
  o: { headers: Record<string, string>; body: string; signal: AbortSignal },
): Promise<number> {
  const u = new URL(url);
  const lookup: LookupFunction = (_host, options, callback) => {
    if (options.all)
      (callback as unknown as (e: null, all: Array<{ address: string; family: number }>) => void)(null, [
        { address: to.address, family: to.family },
      ]);
    else callback(null, to.address, to.family);
  };
  const request = u.protocol === 'https:' ? httpsRequest : httpRequest;
  return new Promise<number>((resolve, reject) => {
    const req = request(
      u,
      {
        method: 'POST',
        headers: { ...o.headers, 'content-length': String(Buffer.byteLength(o.body)) },
        lookup,
        agent: false,
        signal: o.signal,
        // For a literal IP address there is no server name to send (SNI takes names only).
        ...(u.protocol === 'https:' && !u.hostname.startsWith('[') && !/^\d+\.\d+\.\d+\.\d+$/.test(u.hostname)
          ? { servername: u.hostname }
          : {}),
      },
      (res: IncomingMessage) => {
        res.resume();
        res.on('error', () => {});
        resolve(res.statusCode ?? 0);
      },
    );
    req.on('error', reject);
    req.end(o.body);
  });
}
