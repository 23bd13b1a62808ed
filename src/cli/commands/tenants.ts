/**
 * `keel tenants`: the tenants registry on the database (as `keel keys`): each tenant's weight in
 * fair dispatch and its quotas (docs/operations.md). Against a running
 * server, the same is `/v1/tenants` with an admin key.
 */
import type { TenantRecord } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { openDb } from '../common.ts';
import { quotaFlags, quotasLine, withQuotaFlags } from './quota-flags.ts';

export const tenantsHelp = `keel tenants ls|show|set|rm                          the tenants registry: weights (fair dispatch) and quotas
keel tenants ls                                       tenants with a row (any other has weight 1 and the defaults)
keel tenants show <id>                                one tenant
keel tenants set <id> [--weight N] [--name TEXT] [--quota NAME=N …] [--on-limit wait|fail]
                                                      create or update; --quota NAME=none removes a limit
                                                      (quotas: concurrentRuns, runsPerMinute, tokensPerDay, costPerDay, costPerMonth)
keel tenants rm <id>                                  remove the row (back to weight 1 and the defaults)
  All take --db PATH and --json.`;

const tenantLine = (t: TenantRecord) =>
  `${t.id.padEnd(20)} weight ${String(t.weight).padEnd(5)} quotas ${quotasLine(t.quotas)}${t.name ? `  (${t.name})` : ''}`;

export async function tenantsCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const { values, positionals } = args(`tenants ${sub ?? ''}`.trim(), rest, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    name: { type: 'string' },
    weight: { type: 'string' },
    quota: { type: 'string', multiple: true },
    'on-limit': { type: 'string' },
  });
  const id = positionals[0];
  const needId = () => {
    if (!id) throw new UsageError(`tenants ${sub}: name the tenant, e.g. keel tenants ${sub} acme`);
    return id;
  };
  // Flags are checked before the database is opened.
  const quotas = sub === 'set' ? quotaFlags('tenants set', values.quota, values['on-limit']) : {};
  const weight = values.weight !== undefined ? Number(values.weight) : undefined;
  if (weight !== undefined && (!Number.isInteger(weight) || weight < 1))
    throw new UsageError('tenants set: --weight must be a whole number ≥ 1');
  if (!['ls', 'list', 'show', 'set', 'rm'].includes(sub ?? ''))
    throw new UsageError(`tenants: expected ls, show, set or rm\n${tenantsHelp}`);
  const { store } = await openDb(io, values.db, { create: true });
  try {
    switch (sub) {
      case 'ls':
      case 'list': {
        const tenants = await store.tenants.list();
        if (values.json) json(io, tenants);
        else if (tenants.length === 0)
          line(io, 'no tenants in the registry: every tenant has weight 1 and the defaults');
        else for (const t of tenants) line(io, tenantLine(t));
        return 0;
      }
      case 'show': {
        const t = await store.tenants.get(needId());
        if (!t) throw new Error(`no tenant ${id} in the registry (it has weight 1 and the defaults)`);
        if (values.json) json(io, t);
        else line(io, tenantLine(t));
        return 0;
      }
      case 'set': {
        const tenant = needId();
        const touchesQuotas = Object.keys(quotas).length > 0;
        const before = touchesQuotas ? await store.tenants.get(tenant) : undefined;
        const t = await store.tenants.put(
          {
            id: tenant,
            ...(values.name !== undefined ? { name: values.name } : {}),
            ...(weight !== undefined ? { weight } : {}),
            ...(touchesQuotas ? { quotas: withQuotaFlags(before?.quotas ?? {}, quotas) } : {}),
          },
          Date.now(),
        );
        if (values.json) json(io, t);
        else line(io, tenantLine(t));
        return 0;
      }
      default: {
        const tenant = needId();
        if (!(await store.tenants.delete(tenant))) throw new Error(`no tenant ${tenant} in the registry`);
        if (values.json) json(io, { id: tenant, removed: true });
        else line(io, `removed ${tenant}: it has weight 1 and the defaults again`);
        return 0;
      }
    }
  } finally {
    await store.close();
  }
}
