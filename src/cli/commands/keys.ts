import { createApiKey } from '../../server/auth.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { openDb } from '../common.ts';
import { quotaFlags, quotasLine, withQuotaFlags } from './quota-flags.ts';

export const keysHelp = `keel keys create <tenant> [--name NAME] [--rate N] [--scope tenant|admin] [--quota NAME=N …] [--on-limit wait|fail]
                                                     create an API key (shown once); an admin key manages tenants only
keel keys list [--tenant T]                          list keys (never their secrets)
keel keys revoke <key-id>                            revoke a key
  All take --db PATH and --json.`;

export async function keysCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const { values, positionals } = args(`keys ${sub ?? ''}`.trim(), rest, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    name: { type: 'string' },
    rate: { type: 'string' },
    tenant: { type: 'string' },
    scope: { type: 'string' },
    quota: { type: 'string', multiple: true },
    'on-limit': { type: 'string' },
  });
  const { store } = await openDb(io, values.db, { create: true });
  try {
    switch (sub) {
      case 'create': {
        const tenant = positionals[0];
        if (!tenant) throw new UsageError('keys create: name the tenant, e.g. keel keys create acme');
        const rate = values.rate !== undefined ? Number(values.rate) : undefined;
        if (rate !== undefined && (!Number.isInteger(rate) || rate <= 0))
          throw new UsageError('keys create: --rate must be a positive whole number of requests a minute');
        const scope = values.scope ?? 'tenant';
        if (scope !== 'tenant' && scope !== 'admin')
          throw new UsageError(`keys create: --scope is tenant or admin, not ${scope}`);
        const flags = quotaFlags('keys create', values.quota, values['on-limit']);
        if (Object.values(flags).includes(null))
          throw new UsageError('keys create: --quota NAME=none has nothing to remove');
        const quotas = Object.keys(flags).length > 0 ? withQuotaFlags({}, flags) : null;
        const { secret, key } = await createApiKey(store, {
          tenant,
          scope,
          quotas,
          ...(values.name ? { name: values.name } : {}),
          ...(rate ? { ratePerMinute: rate } : {}),
        });
        if (values.json)
          json(io, { id: key.id, tenant: key.tenant, name: key.name, scope: key.scope, quotas: key.quotas, secret });
        else {
          line(
            io,
            `created ${scope === 'admin' ? 'admin ' : ''}key ${key.id} for tenant ${key.tenant}${key.quotas ? ` (quotas ${quotasLine(key.quotas)})` : ''}`,
          );
          line(io, `secret (shown once, store it now): ${secret}`);
        }
        return 0;
      }
      case 'list': {
        const keys = await store.keys.list(values.tenant);
        if (values.json)
          json(
            io,
            keys.map(({ hash: _h, ...k }) => k),
          );
        else if (keys.length === 0) line(io, 'no API keys: the server serves loopback clients without authentication');
        else
          for (const k of keys)
            line(
              io,
              `${k.id}  ${k.tenant.padEnd(16)} ${k.prefix}…  ${k.scope === 'admin' ? '[admin] ' : ''}${k.name ?? ''}${k.revokedAt ? `  revoked ${new Date(k.revokedAt).toISOString()}` : ''}`,
            );
        return 0;
      }
      case 'revoke': {
        const id = positionals[0];
        if (!id) throw new UsageError('keys revoke: give the key id (see keel keys list)');
        if (!(await store.keys.revoke(id, Date.now()))) throw new Error(`no API key ${id}`);
        if (values.json) json(io, { id, revoked: true });
        else line(io, `revoked ${id}`);
        return 0;
      }
      default:
        throw new UsageError(`keys: expected create, list or revoke\n${keysHelp}`);
    }
  } finally {
    await store.close();
  }
}
