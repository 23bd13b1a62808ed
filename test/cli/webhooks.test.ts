/**
 * `keel webhooks` against a real server (HTTP, API keys): create, list, get, update, deliveries,
 * delivery, redeliver, rotate-secret and delete as the key's tenant, plain and --json, and bad
 * input refused with the API's reason or a usage error.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyWebhookSignature } from '../../src/index.ts';
import { startTestServer, type TestServer } from '../support/server-helpers.ts';
import { Receiver } from '../webhooks/receiver.ts';
import { keel, until } from './io.ts';

let t: TestServer;
let hook: Receiver;
let acme: string[];
let globex: string[];

beforeAll(async () => {
  hook = await new Receiver().start();
  t = await startTestServer({ keys: [{ tenant: 'acme' }, { tenant: 'globex' }] });
  acme = ['--url', t.url, '--key', t.secrets[0]!];
  globex = ['--url', t.url, '--key', t.secrets[1]!];
});

afterAll(async () => {
  await t?.close();
  await hook?.stop();
});

const ok = async (argv: string[]) => {
  const r = await keel(['webhooks', ...argv]);
  expect(r.err, argv.join(' ')).toBe('');
  expect(r.code, argv.join(' ')).toBe(0);
  return r.out;
};

describe('keel webhooks', () => {
  it('creates, lists, shows, updates, lists deliveries, shows and redelivers one, rotates the secret, deletes', async () => {
    const created = await ok(['create', hook.url, '--events', 'run.queued,run.completed', ...acme]);
    expect(created).toMatch(
      /^created webhook (\S+): run\.queued, run\.completed to http:\/\/127\.0\.0\.1:\d+\/hook\nsecret \(shown once, store it now\): whsec_\S+\n$/,
    );
    const id = /^created webhook (\S+):/.exec(created)![1]!;
    const secret = /secret \(shown once, store it now\): (\S+)/.exec(created)![1]!;

    expect(await ok(['list', ...acme])).toMatch(
      new RegExp(`${id}\\s+${hook.url.replace(/[.]/g, '\\.')}\\s+run\\.queued,run\\.completed\\s+yes`),
    );
    expect(await ok(['list', ...globex])).toBe('no webhooks\n');
    const listed = JSON.parse(await ok(['list', '--json', ...acme])) as Array<{ id: string; secret?: string }>;
    expect(listed).toEqual([
      expect.objectContaining({ id, url: hook.url, events: ['run.queued', 'run.completed'], active: true }),
    ]);
    expect(listed[0]!.secret).toBeUndefined();
    expect(await ok(['get', id, ...acme])).toContain(
      `webhook ${id}\n  receiver  ${hook.url}\n  events    run.queued, run.completed`,
    );

    // A message: a queued run, a delivery, signed with the secret.
    const session = await t.api(t.secrets[0]).session();
    await t.api(t.secrets[0]).post(`/v1/sessions/${session.id}/messages`, { content: 'hello' });
    await hook.until(1);
    const first = hook.received[0]!;
    expect(first.headers['keel-event']).toBe('run.queued');
    expect(verifyWebhookSignature(secret, first.headers['keel-signature'] as string, first.body)).toBe(true);
    const deliveryId = first.headers['keel-delivery'] as string;
    const receivedOf = () => hook.received.filter((r) => r.headers['keel-delivery'] === deliveryId);
    await until(
      async () => new RegExp(`${deliveryId}\\s+run\\.queued\\s+delivered`).test(await ok(['deliveries', id, ...acme])),
      'the delivery recorded',
    );
    expect(await ok(['deliveries', id, ...acme])).toMatch(
      new RegExp(`${deliveryId}\\s+run\\.queued\\s+delivered\\s+1\\s+200`),
    );
    const one = await ok(['delivery', deliveryId, ...acme]);
    expect(one).toContain(`delivery ${deliveryId} of webhook ${id}: run.queued, delivered`);
    expect(one).toMatch(/ {2}1\s+\S+ \S+\s+\d+ms\s+200/);
    expect(JSON.parse(await ok(['delivery', deliveryId, '--json', ...acme]))).toMatchObject({
      id: deliveryId,
      webhook_id: id,
      status: 'delivered',
      session_id: session.id,
    });

    expect(await ok(['redeliver', deliveryId, ...acme])).toBe(
      `delivery ${deliveryId} is pending again: it is attempted now\n`,
    );
    await until(() => receivedOf().length === 2, 'the redelivery');

    const rotated = await ok(['rotate-secret', id, '--overlap', '600', ...acme]);
    expect(rotated).toMatch(
      /^rotated the secret of webhook \S+\nsecret \(shown once, store it now\): whsec_\S+\nthe previous secret signs deliveries too until \S+ \S+ UTC\n$/,
    );
    const newSecret = /secret \(shown once, store it now\): (\S+)/.exec(rotated)![1]!;
    expect(newSecret).not.toBe(secret);
    await ok(['redeliver', deliveryId, ...acme]);
    await until(() => receivedOf().length === 3, 'the second redelivery');
    const third = receivedOf()[2]!;
    for (const s of [secret, newSecret])
      expect(verifyWebhookSignature(s, third.headers['keel-signature'] as string, third.body)).toBe(true);

    const disabled = await ok(['update', id, '--disable', '--events', 'run.failed', ...acme]);
    expect(disabled).toContain(`webhook ${id} (disabled)`);
    expect(disabled).toContain('events    run.failed');
    expect(JSON.parse(await ok(['update', id, '--enable', '--json', ...acme]))).toMatchObject({
      id,
      active: true,
      events: ['run.failed'],
    });

    // Another tenant's webhook is not found.
    const other = await keel(['webhooks', 'get', id, ...globex]);
    expect(other.code).toBe(1);
    expect(other.err).toMatch(/webhook .* (not found|does not exist).*\(not_found, HTTP 404\)/);

    expect(await ok(['delete', id, ...acme])).toBe(`deleted webhook ${id}\n`);
    const gone = await keel(['webhooks', 'delete', id, ...acme]);
    expect(gone.code).toBe(1);
    expect(gone.err).toMatch(/not_found, HTTP 404/);
  });

  it('refuses bad input: the API’s reason, or a usage error', async () => {
    const badEvent = await keel(['webhooks', 'create', hook.url, '--events', 'run.exploded', ...acme]);
    expect(badEvent.code).toBe(1);
    expect(badEvent.err).toMatch(/\(validation, HTTP 400\)/);
    const badOverlap = await keel(['webhooks', 'rotate-secret', 'whatever', '--overlap', 'soon', ...acme]);
    expect(badOverlap.code).toBe(2);
    expect(badOverlap.err).toMatch(/--overlap must be a whole number/);
    const noEvents = await keel(['webhooks', 'create', hook.url, ...acme]);
    expect(noEvents.code).toBe(2);
    expect(noEvents.err).toMatch(/--events is required/);
    const nothing = await keel(['webhooks', 'update', 'x', ...acme]);
    expect(nothing.code).toBe(2);
    expect(nothing.err).toMatch(/nothing to change/);
    expect((await keel(['webhooks', 'frobnicate', ...acme])).code).toBe(2);
    expect((await keel(['webhooks', 'get', ...acme])).err).toMatch(/give the webhook id/);
    const noKey = await keel(['webhooks', 'list', '--url', t.url]);
    expect(noKey.code).toBe(1);
    expect(noKey.err).toMatch(/requires an API key: pass --key or set \$KEEL_API_KEY/);
    const noServer = await keel(['webhooks', 'list', '--url', 'http://127.0.0.1:9']);
    expect(noServer.code).toBe(1);
    expect(noServer.err).toMatch(
      /cannot reach the Keel server at http:\/\/127\.0\.0\.1:9.*\n {2}start a server with "keel serve"/,
    );
    const fromEnv = await keel(['webhooks', 'list'], { env: { KEEL_URL: t.url, KEEL_API_KEY: t.secrets[1]! } });
    expect(fromEnv.out).toBe('no webhooks\n');
  });
});
