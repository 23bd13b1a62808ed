/**
 * Limits per client address, through real HTTP from two loopback addresses (127.0.0.1 and
 * 127.0.0.2): callback URLs (no API key) are limited per address, not in one bucket every caller
 * shares; X-Forwarded-For names the client only behind a configured trusted proxy; the limiter
 * keeps a bounded number of buckets.
 */
import { request } from 'node:http';
import { afterEach, describe, expect, it } from 'vitest';
import { TokenBuckets } from '../../src/server/rate-limit.ts';
import { startTestServer, type TestServer } from '../support/server-helpers.ts';

const servers: TestServer[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) await s.close();
});

/** A POST from `from` (a local address), with these headers; its status and problem type. */
function post(
  base: string,
  path: string,
  o: { from: string; headers?: Record<string, string> },
): Promise<{ status: number; type: string | undefined }> {
  const url = new URL(path, base);
  return new Promise((resolve, reject) => {
    const body = '{"ok":true}';
    const req = request(
      {
        host: url.hostname,
        port: url.port,
        path: url.pathname,
        method: 'POST',
        localAddress: o.from,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body), ...o.headers },
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () =>
          resolve({
            status: res.statusCode ?? 0,
            type: text.startsWith('{') ? (JSON.parse(text) as { type?: string }).type?.split('/').at(-1) : undefined,
          }),
        );
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

const A = '127.0.0.1';
const B = '127.0.0.2';
const UNKNOWN = `/v1/callbacks/${'x'.repeat(43)}`;

describe('callback URLs are limited per client address', () => {
  it('address A over its requests a minute gets 429; address B still gets through', async () => {
    const srv = await startTestServer({ keys: [{ tenant: 'acme' }], rateLimitPerMinute: 3 });
    servers.push(srv);
    for (let i = 0; i < 3; i++)
      expect(await post(srv.url, UNKNOWN, { from: A })).toEqual({ status: 404, type: 'not_found' });
    expect(await post(srv.url, UNKNOWN, { from: A })).toEqual({ status: 429, type: 'rate_limited' });
    expect(await post(srv.url, UNKNOWN, { from: B })).toEqual({ status: 404, type: 'not_found' });
  });

  it('unknown tokens count as failed authentications of the address: past the limit it is refused, other addresses are not', async () => {
    const srv = await startTestServer({ keys: [{ tenant: 'acme' }], authFailuresPerMinute: 2 });
    servers.push(srv);
    for (let i = 0; i < 2; i++)
      expect(await post(srv.url, UNKNOWN, { from: A })).toEqual({ status: 404, type: 'not_found' });
    expect(await post(srv.url, UNKNOWN, { from: A })).toEqual({ status: 429, type: 'rate_limited' });
    expect(await post(srv.url, UNKNOWN, { from: B })).toEqual({ status: 404, type: 'not_found' });
  });

  it('X-Forwarded-For is ignored unless the request comes from a trusted proxy; then its last untrusted address is the client', async () => {
    const direct = await startTestServer({ keys: [{ tenant: 'acme' }], rateLimitPerMinute: 2 });
    servers.push(direct);
    // Not behind a trusted proxy: a client cannot pick a new address per request.
    for (let i = 0; i < 2; i++)
      expect(
        (await post(direct.url, UNKNOWN, { from: A, headers: { 'x-forwarded-for': `203.0.113.${i}` } })).status,
      ).toBe(404);
    expect(await post(direct.url, UNKNOWN, { from: A, headers: { 'x-forwarded-for': '203.0.113.9' } })).toEqual({
      status: 429,
      type: 'rate_limited',
    });

    const proxied = await startTestServer({ keys: [{ tenant: 'acme' }], rateLimitPerMinute: 2, trustedProxies: [A] });
    servers.push(proxied);
    // The proxy (A) appends the address it saw; what the client wrote before it is not trusted.
    const from = (client: string, spoofed = '198.51.100.7') => ({
      from: A,
      headers: { 'x-forwarded-for': `${spoofed}, ${client}` },
    });
    for (let i = 0; i < 2; i++)
      expect((await post(proxied.url, UNKNOWN, from('203.0.113.1', `198.51.100.${i}`))).status).toBe(404);
    expect(await post(proxied.url, UNKNOWN, from('203.0.113.1'))).toEqual({ status: 429, type: 'rate_limited' });
    expect(await post(proxied.url, UNKNOWN, from('203.0.113.2'))).toEqual({ status: 404, type: 'not_found' });
    // An untrusted address's X-Forwarded-For is ignored even on this server: B is B.
    for (let i = 0; i < 2; i++)
      expect(
        (await post(proxied.url, UNKNOWN, { from: B, headers: { 'x-forwarded-for': `203.0.113.${10 + i}` } })).status,
      ).toBe(404);
    expect((await post(proxied.url, UNKNOWN, { from: B, headers: { 'x-forwarded-for': '203.0.113.99' } })).status).toBe(
      429,
    );
  });
});

describe('TokenBuckets', () => {
  it('keeps at most `max` buckets, dropping the least recently used; a dropped one starts full again', () => {
    const buckets = new TokenBuckets({ max: 3 });
    const take = (id: string) => buckets.take(id, 1, 0);
    expect(take('a')).toBeUndefined();
    expect(take('a')).toBeGreaterThan(0); // a's one token is spent: seconds to wait
    for (const id of ['b', 'c', 'd']) expect(take(id)).toBeUndefined();
    expect(buckets.size).toBe(3);
    // a was the least recently used: dropped, so it starts full.
    expect(take('a')).toBeUndefined();
    for (let i = 0; i < 10_000; i++) take(`addr-${i}`);
    expect(buckets.size).toBe(3);
  });

  it('refills at the rate: a spent bucket has a token again after its share of the minute', () => {
    const buckets = new TokenBuckets({ max: 10 });
    expect(buckets.take('a', 60, 0)).toBeUndefined();
    for (let i = 0; i < 59; i++) buckets.take('a', 60, 0);
    expect(buckets.take('a', 60, 0)).toBe(1);
    expect(buckets.take('a', 60, 1000)).toBeUndefined();
  });
});

describe('one request budget per API key, whichever protocol it speaks', () => {
  it('requests to /v1, /openai/v1 and /mcp spend the same bucket', async () => {
    const srv = await startTestServer({ keys: [{ tenant: 'acme' }], rateLimitPerMinute: 3 });
    servers.push(srv);
    const auth = { authorization: `Bearer ${srv.secrets[0]}` };
    const get = (path: string) => fetch(`${srv.url}${path}`, { headers: auth }).then((r) => r.status);
    expect(await get('/v1/sessions')).toBe(200);
    expect(await get('/v1/sessions')).toBe(200);
    expect(await get('/openai/v1/responses/none')).toBe(404);
    // The key's three requests are spent: another protocol's route is limited as well.
    expect(await get('/openai/v1/responses/none')).toBe(429);
    const mcp = await fetch(`${srv.url}/mcp`, {
      method: 'POST',
      headers: { ...auth, 'content-type': 'application/json', accept: 'application/json, text/event-stream' },
      body: JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'ping' }),
    });
    expect(mcp.status).toBe(429);
  });
});
