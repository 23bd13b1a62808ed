/**
 * `GET /v1/blobs/{hash}` (ADR-0040) on both backends: a large message text and attachment sent
 * through the API are served by hash to their tenant, whole or by byte range, with their size and
 * media type; another tenant, an unknown hash and a bad hash are refused precisely; an event too
 * large answers 413 `event_too_large` before the store; the client's `blobs.get` reads ranges.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createKeelClient, KeelProblem } from '../../src/client/index.ts';
import { contentHash } from '../../src/index.ts';
import { BACKENDS, startTestServer, type TestServer } from '../support/server-helpers.ts';

const PROBLEM = 'https://keel.dev/problems/';

for (const backend of BACKENDS) {
  describe(`GET /v1/blobs/{hash} (${backend})`, () => {
    let t: TestServer;
    const text = `${'A large pasted document. '.repeat(12_000)}the end`;
    const file = Buffer.alloc(300 * 1024);
    for (let i = 0; i < file.length; i++) file[i] = (i * 31) & 0xff;
    const fileData = file.toString('base64');
    const textHash = contentHash(text);
    const fileHash = contentHash(fileData);
    const fetchBlob = (hash: string, secret: string, headers: Record<string, string> = {}) =>
      fetch(`${t.url}/v1/blobs/${hash}`, { headers: { authorization: `Bearer ${secret}`, ...headers } });

    beforeAll(async () => {
      t = await startTestServer({
        backend,
        keys: [{ tenant: 'acme' }, { tenant: 'globex' }],
        bodyLimitBytes: 16 << 20,
      });
      const api = t.api(t.secrets[0]);
      const s = await api.session();
      const sent = await api.post(`/v1/sessions/${s.id}/messages`, {
        content: [
          { type: 'text', text },
          { type: 'file', media_type: 'image/png', data: fileData, filename: 'chart.png' },
        ],
      });
      expect(sent.status).toBe(202);
      await api.waitForRun(sent.body.run.id, 'completed');
    }, 60_000);
    afterAll(() => t?.close());

    it('serves a large message text whole, with its size and media type, and the events refer to it', async () => {
      const r = await fetchBlob(textHash, t.secrets[0]!);
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toBe('text/plain; charset=utf-8');
      expect(r.headers.get('content-length')).toBe(String(Buffer.byteLength(text)));
      expect(r.headers.get('accept-ranges')).toBe('bytes');
      expect(r.headers.get('etag')).toBe(`"${textHash}"`);
      expect(await r.text()).toBe(text);
      // The API's events give the message whole.
      const events = await t.api(t.secrets[0]).allEvents((await t.runtime.sessions.list({ limit: 1 }))[0]!.id);
      const message = events.find((e) => e.type === 'user/message');
      expect(message.data.message.content[0].text).toBe(text);
    });

    it('serves an attachment as its bytes, and byte ranges (206, suffix, 416)', async () => {
      const whole = await fetchBlob(fileHash, t.secrets[0]!);
      expect(whole.status).toBe(200);
      expect(whole.headers.get('content-type')).toBe('image/png');
      expect(Buffer.from(await whole.arrayBuffer()).equals(file)).toBe(true);

      const part = await fetchBlob(fileHash, t.secrets[0]!, { range: 'bytes=100-199' });
      expect(part.status).toBe(206);
      expect(part.headers.get('content-range')).toBe(`bytes 100-199/${file.length}`);
      expect(part.headers.get('content-length')).toBe('100');
      expect(Buffer.from(await part.arrayBuffer()).equals(file.subarray(100, 200))).toBe(true);

      const suffix = await fetchBlob(textHash, t.secrets[0]!, { range: 'bytes=-7' });
      expect(suffix.status).toBe(206);
      expect(await suffix.text()).toBe('the end');

      const open = await fetchBlob(fileHash, t.secrets[0]!, { range: `bytes=${file.length - 5}-` });
      expect(open.status).toBe(206);
      expect(Buffer.from(await open.arrayBuffer()).equals(file.subarray(file.length - 5))).toBe(true);

      const past = await fetchBlob(fileHash, t.secrets[0]!, { range: `bytes=${file.length}-` });
      expect(past.status).toBe(416);
      expect(past.headers.get('content-range')).toBe(`bytes */${file.length}`);
      expect(await past.json()).toMatchObject({ type: `${PROBLEM}range_not_satisfiable`, size: file.length });

      // A Range this server does not serve (several ranges) gets the whole content.
      const several = await fetchBlob(textHash, t.secrets[0]!, { range: 'bytes=0-1,5-6' });
      expect(several.status).toBe(200);
    });

    it('refuses another tenant, an unknown hash and a bad hash precisely', async () => {
      const other = await fetchBlob(textHash, t.secrets[1]!);
      expect(other.status).toBe(404);
      expect(await other.json()).toMatchObject({
        type: `${PROBLEM}blob_not_found`,
        detail: 'no session of this tenant refers to a blob with this hash',
      });
      const unknown = await fetchBlob(`sha256:${'0'.repeat(64)}`, t.secrets[0]!);
      expect(unknown.status).toBe(404);
      expect((await unknown.json()).type).toBe(`${PROBLEM}blob_not_found`);
      const bad = await fetchBlob('sha256:xyz', t.secrets[0]!);
      expect(bad.status).toBe(400);
      expect((await bad.json()).type).toBe(`${PROBLEM}validation`);
      const anonymous = await fetch(`${t.url}/v1/blobs/${textHash}`);
      expect(anonymous.status).toBe(401);
    });

    it('answers 413 event_too_large for a message too large once its payloads are apart, storing nothing', async () => {
      const api = t.api(t.secrets[0]);
      const s = await api.session();
      // 40 parts of 250 KB, each under the threshold: 10 MB in one event.
      const parts = Array.from({ length: 40 }, (_, i) => ({ type: 'text', text: `${i}`.padEnd(250_000, '.') }));
      const r = await api.post(`/v1/sessions/${s.id}/messages`, { content: parts });
      expect(r.status).toBe(413);
      expect(r.body).toMatchObject({ type: `${PROBLEM}event_too_large`, limit: 8 << 20 });
      expect(r.body.bytes).toBeGreaterThan(8 << 20);
      expect((await api.get(`/v1/sessions/${s.id}/runs`)).body.data).toEqual([]);
      expect((await t.store.sessions.get(s.id))!.lastSeq).toBeLessThanOrEqual(1);
    });

    it('the client reads a blob whole or by range, and throws the problem for a missing one', async () => {
      const keel = createKeelClient({ baseUrl: t.url, apiKey: t.secrets[0]! });
      const whole = await keel.blobs.get(fileHash);
      expect(whole.mediaType).toBe('image/png');
      expect(whole.size).toBe(file.length);
      expect(Buffer.from(whole.bytes).equals(file)).toBe(true);
      const part = await keel.blobs.get(textHash, { range: { start: 0, end: 9 } });
      expect(part).toMatchObject({ size: Buffer.byteLength(text), range: { start: 0, end: 9 } });
      expect(Buffer.from(part.bytes).toString()).toBe(text.slice(0, 10));
      const missing = await keel.blobs.get(`sha256:${'1'.repeat(64)}`).catch((e: unknown) => e);
      expect(missing).toBeInstanceOf(KeelProblem);
      expect(missing).toMatchObject({ status: 404 });
    });
  });
}
