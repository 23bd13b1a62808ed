import type { components } from '../../client/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { clip, intOption, noPositionals, positional, table, time } from '../common.ts';
import { explained, serverClient } from '../server-client.ts';

export const webhooksHelp = `keel webhooks list [--limit 50]                        your subscriptions
keel webhooks create <receiver-url> --events T[,T…] [--secret S] [--disabled]
                                                        subscribe; prints the secret, once
keel webhooks get <id>                                  one subscription
keel webhooks update <id> [--receiver URL] [--events T[,T…]] [--enable | --disable]
keel webhooks delete <id>                               delete it, with its deliveries
keel webhooks deliveries <id> [--limit 20]              its deliveries, newest first
keel webhooks delivery <delivery-id>                    one delivery with its attempts
keel webhooks redeliver <delivery-id>                   attempt it again now
keel webhooks rotate-secret <id> [--overlap SECONDS]    a new secret (printed once); the old one
                                                        signs too for SECONDS (default 86400)
  Talks to a running server ("keel serve") as your API key's tenant: --url (default $KEEL_URL or
  http://127.0.0.1:8787), --key (default $KEEL_API_KEY); --json prints the API's answer. Event
  types: run.<status> for every run status (run.completed, run.waiting_approval…) and
  schedule.fired (docs/webhooks.md).`;

type WebhookJson = components['schemas']['Webhook'] & { secret?: string };
type DeliveryJson = components['schemas']['WebhookDelivery'];
type EventType = components['schemas']['Webhook']['events'][number];

const SUBCOMMANDS = [
  'list',
  'create',
  'get',
  'update',
  'delete',
  'deliveries',
  'delivery',
  'redeliver',
  'rotate-secret',
];

/** The server checks the names (an unknown one is a `validation` problem naming it). */
const eventsOf = (command: string, v: string | undefined): EventType[] | undefined => {
  if (v === undefined) return undefined;
  const events = v
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');
  if (events.length === 0)
    throw new UsageError(`${command}: --events lists one or more event types, e.g. run.completed,run.failed`);
  return events as EventType[];
};

const at = (iso: string | null): string => (iso === null ? '-' : time(Date.parse(iso)));

function printWebhook(io: Io, w: WebhookJson): void {
  line(io, `webhook ${w.id}${w.active ? '' : ' (disabled)'}`);
  line(io, `  receiver  ${w.url}`);
  line(io, `  events    ${w.events.join(', ')}`);
  line(io, `  created   ${at(w.created_at)}   updated ${at(w.updated_at)}`);
  if (w.previous_secret_expires_at)
    line(io, `  the previous secret signs too until ${at(w.previous_secret_expires_at)} UTC`);
}

function printDelivery(io: Io, d: DeliveryJson): void {
  line(io, `delivery ${d.id} of webhook ${d.webhook_id}: ${d.event_type}, ${d.status}`);
  line(io, `  created   ${at(d.created_at)}   retried until ${at(d.retry_until)}`);
  if (d.status === 'pending') line(io, `  next attempt ${at(d.next_attempt_at)}`);
  if (d.delivered_at) line(io, `  delivered ${at(d.delivered_at)}`);
  if (d.last_error) line(io, `  last error ${d.last_error}`);
  if (d.attempts.length === 0) line(io, '  no attempt yet');
  else {
    line(
      io,
      table(
        ['  #', 'STARTED', 'DURATION', 'STATUS', 'ERROR'],
        d.attempts.map((a) => [
          `  ${a.n}`,
          at(a.started_at),
          `${a.duration_ms}ms`,
          a.status_code === null ? '-' : String(a.status_code),
          a.error ?? '',
        ]),
      ),
    );
  }
  line(io, `  payload   ${clip(JSON.stringify(d.payload), 200)}`);
}

export async function webhooksCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const name = `webhooks ${sub ?? ''}`.trim();
  if (sub === undefined || !SUBCOMMANDS.includes(sub))
    throw new UsageError(`webhooks: expected ${SUBCOMMANDS.join(', ')}\n${webhooksHelp}`);
  const { values, positionals } = args(name, rest, {
    url: { type: 'string' },
    key: { type: 'string' },
    json: { type: 'boolean' },
    limit: { type: 'string' },
    events: { type: 'string' },
    secret: { type: 'string' },
    disabled: { type: 'boolean' },
    receiver: { type: 'string' },
    enable: { type: 'boolean' },
    disable: { type: 'boolean' },
    overlap: { type: 'string' },
  });
  const client = serverClient(name, io, values.url, values.key);
  const call = async <T>(request: () => Promise<T>): Promise<T> => {
    try {
      return await request();
    } catch (e) {
      throw explained(e);
    }
  };
  switch (sub) {
    case 'list': {
      noPositionals(name, positionals);
      const limit = intOption(name, 'limit', values.limit, { min: 1, default: 50 });
      const page = await call(() => client.webhooks.list({ limit: Math.min(limit, 200) }));
      if (values.json) json(io, page.data);
      else if (page.data.length === 0) line(io, 'no webhooks');
      else
        line(
          io,
          table(
            ['ID', 'RECEIVER', 'EVENTS', 'ACTIVE'],
            page.data.map((w) => [w.id, clip(w.url, 60), clip(w.events.join(','), 60), w.active ? 'yes' : 'no']),
          ),
        );
      return 0;
    }
    case 'create': {
      const receiver = positional(
        name,
        positionals,
        'receiver URL, e.g. keel webhooks create https://example.com/hook --events run.completed',
      );
      const events = eventsOf(name, values.events);
      if (!events) throw new UsageError(`${name}: --events is required, e.g. --events run.completed,run.failed`);
      const w = await call(() =>
        client.webhooks.create({
          url: receiver,
          events,
          ...(values.secret !== undefined ? { secret: values.secret } : {}),
          ...(values.disabled ? { active: false } : {}),
        }),
      );
      if (values.json) json(io, w);
      else {
        line(io, `created webhook ${w.id}${w.active ? '' : ' (disabled)'}: ${w.events.join(', ')} to ${w.url}`);
        line(io, `secret (shown once, store it now): ${w.secret}`);
      }
      return 0;
    }
    case 'get': {
      const hook = positional(name, positionals, 'webhook id (see keel webhooks list)');
      const w = await call(() => client.webhooks.get(hook));
      if (values.json) json(io, w);
      else printWebhook(io, w);
      return 0;
    }
    case 'update': {
      const hook = positional(name, positionals, 'webhook id (see keel webhooks list)');
      if (values.enable && values.disable) throw new UsageError(`${name}: give one of --enable and --disable`);
      const events = eventsOf(name, values.events);
      const patch = {
        ...(values.receiver !== undefined ? { url: values.receiver } : {}),
        ...(events ? { events } : {}),
        ...(values.enable ? { active: true } : values.disable ? { active: false } : {}),
      };
      if (Object.keys(patch).length === 0)
        throw new UsageError(`${name}: nothing to change: give --receiver, --events, --enable or --disable`);
      const w = await call(() => client.webhooks.update(hook, patch));
      if (values.json) json(io, w);
      else printWebhook(io, w);
      return 0;
    }
    case 'delete': {
      const hook = positional(name, positionals, 'webhook id (see keel webhooks list)');
      await call(() => client.webhooks.delete(hook));
      if (values.json) json(io, { id: hook, deleted: true });
      else line(io, `deleted webhook ${hook}`);
      return 0;
    }
    case 'deliveries': {
      const hook = positional(name, positionals, 'webhook id, e.g. keel webhooks deliveries <id>');
      const limit = intOption(name, 'limit', values.limit, { min: 1, default: 20 });
      const page = await call(() => client.webhooks.deliveries(hook, { limit: Math.min(limit, 200) }));
      if (values.json) json(io, page.data);
      else if (page.data.length === 0) line(io, `webhook ${hook} has no deliveries`);
      else {
        line(
          io,
          table(
            ['ID', 'EVENT', 'STATUS', 'ATTEMPTS', 'LAST', 'CREATED'],
            page.data.map((d) => [
              d.id,
              d.event_type,
              d.status,
              String(d.attempts.length),
              d.last_error ?? (d.last_status_code === null ? '-' : String(d.last_status_code)),
              at(d.created_at),
            ]),
          ),
        );
      }
      return 0;
    }
    case 'delivery': {
      const delivery = positional(name, positionals, 'delivery id (see keel webhooks deliveries <id>)');
      const d = await call(() => client.webhooks.delivery(delivery));
      if (values.json) json(io, d);
      else printDelivery(io, d);
      return 0;
    }
    case 'redeliver': {
      const delivery = positional(name, positionals, 'delivery id (see keel webhooks deliveries <id>)');
      const found = await call(() => client.webhooks.delivery(delivery));
      const d = await call(() => client.webhooks.redeliver(found.webhook_id, delivery));
      if (values.json) json(io, d);
      else line(io, `delivery ${d.id} is pending again: it is attempted now`);
      return 0;
    }
    case 'rotate-secret': {
      const hook = positional(name, positionals, 'webhook id (see keel webhooks list)');
      const overlap =
        values.overlap !== undefined ? intOption(name, 'overlap', values.overlap, { min: 0, default: 0 }) : undefined;
      const w = await call(() =>
        client.webhooks.rotateSecret(hook, overlap !== undefined ? { overlap_seconds: overlap } : {}),
      );
      if (values.json) json(io, w);
      else {
        line(io, `rotated the secret of webhook ${w.id}`);
        line(io, `secret (shown once, store it now): ${w.secret}`);
        line(
          io,
          w.previous_secret_expires_at
            ? `the previous secret signs deliveries too until ${at(w.previous_secret_expires_at)} UTC`
            : 'the previous secret no longer signs',
        );
      }
      return 0;
    }
    default:
      throw new UsageError(`webhooks: expected ${SUBCOMMANDS.join(', ')}\n${webhooksHelp}`);
  }
}
