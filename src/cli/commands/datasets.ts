import { loadConfig, modelResolverFor, type LoadedConfig } from '../../config/index.ts';
import type { Runtime } from '../../runs/index.ts';
import { RUN_STATUS_ORDER } from '../../runs/lifecycle/run-status.ts';
import type { DatasetRecord, RunStatus, Store } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { intOption, openDb, positional, table, time } from '../common.ts';
import { configuredRuntime } from '../configured-runtime.ts';

export const datasetsHelp = `keel datasets ls|create|show   datasets of recorded runs, to evaluate changes on
  keel datasets create NAME --run ID [--run ID ...]   the given runs (they must have ended)
  keel datasets create NAME --agent NAME[@VERSION] [--status completed,...] [--limit N]
      the runs a filter matches, oldest first; each item is a frozen copy of one run (what it was
      asked at each step and what it decided), the reference an evaluation scores against
  keel datasets ls               the datasets
  keel datasets show ID|NAME     its items
  --tenant T (default "default"), --json, --db PATH (default $KEEL_DB or ./.keel/keel.db).
  keel eval DATASET --candidate name@version evaluates an agent version on one.`;

/** A runtime over `store` with the configuration's agents, scorers and model ids. */
export function evalRuntime(store: Store, config: LoadedConfig): Runtime {
  return configuredRuntime(store, config, {
    resolveModel: modelResolverFor(config),
    ...(config.scorers ? { scorers: config.scorers } : {}),
  });
}

/** The dataset with this id, or the newest of the tenant's with this name. */
export async function findDataset(rt: Runtime, tenant: string, idOrName: string): Promise<DatasetRecord> {
  try {
    return await rt.evals.datasets.get(idOrName, { tenant });
  } catch {
    let found: DatasetRecord | undefined;
    for (let after: string | undefined; ;) {
      const page = await rt.evals.datasets.list({ tenant, limit: 500, ...(after ? { after } : {}) });
      for (const d of page) if (d.name === idOrName) found = d;
      if (page.length < 500) break;
      after = page.at(-1)!.id;
    }
    if (!found) throw new Error(`no dataset ${idOrName} (by id or name) for tenant ${tenant}`);
    return found;
  }
}

export async function datasetsCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const { values, positionals } = args('datasets', rest, {
    run: { type: 'string', multiple: true },
    agent: { type: 'string' },
    status: { type: 'string' },
    limit: { type: 'string' },
    tenant: { type: 'string' },
    json: { type: 'boolean' },
    db: { type: 'string' },
    config: { type: 'string' },
  });
  const tenant = values.tenant ?? 'default';
  const config = await loadConfig(values.config);
  const { store } = await openDb(io, values.db);
  const rt = evalRuntime(store, config);
  try {
    switch (sub) {
      case 'create': {
        const name = positional('datasets create', positionals, 'dataset name');
        const runs = values.run ?? [];
        if (runs.length > 0 === (values.agent !== undefined || values.status !== undefined))
          throw new UsageError('datasets create: give --run IDs, or a filter (--agent, --status), not both');
        const statuses = values.status?.split(',').map((s) => s.trim());
        const unknown = statuses?.filter((s) => !(RUN_STATUS_ORDER as readonly string[]).includes(s)) ?? [];
        if (unknown.length > 0) throw new UsageError(`datasets create: unknown status ${unknown.join(', ')}`);
        const d = await rt.evals.datasets.create(
          runs.length > 0
            ? { name, runs }
            : {
                name,
                filter: {
                  ...(values.agent !== undefined ? { agent: values.agent } : {}),
                  ...(statuses ? { statuses: statuses as RunStatus[] } : {}),
                  ...(values.limit !== undefined
                    ? { limit: intOption('datasets create', 'limit', values.limit, { min: 1, default: 100 }) }
                    : {}),
                },
              },
          { tenant },
        );
        if (values.json) json(io, d);
        else line(io, `dataset ${d.id} "${d.name}": ${d.itemCount} item${d.itemCount === 1 ? '' : 's'}`);
        return 0;
      }
      case 'ls': {
        const list = await rt.evals.datasets.list({ tenant, limit: 1000 });
        if (values.json) json(io, list);
        else
          line(
            io,
            table(
              ['ID', 'NAME', 'ITEMS', 'CREATED'],
              list.map((d) => [d.id, d.name, String(d.itemCount), time(d.createdAt)]),
            ),
          );
        return 0;
      }
      case 'show': {
        const d = await findDataset(rt, tenant, positional('datasets show', positionals, 'dataset id or name'));
        const items = await rt.evals.datasets.items(d.id, { tenant, limit: 1000 });
        if (values.json) json(io, { ...d, items });
        else {
          line(io, `dataset ${d.id} "${d.name}": ${d.itemCount} items`);
          line(
            io,
            table(
              ['#', 'SOURCE RUN', 'STEPS', 'STATUS', 'FINAL ANSWER'],
              items.map((i) => {
                const f = i.data as { steps: unknown[]; outcome: { status: string; finalText: string | null } };
                return [
                  String(i.position),
                  i.sourceRunId,
                  String(f.steps.length),
                  f.outcome.status,
                  (f.outcome.finalText ?? '').slice(0, 60),
                ];
              }),
            ),
          );
        }
        return 0;
      }
      default:
        throw new UsageError(`datasets: expected ls, create or show\n${datasetsHelp}`);
    }
  } finally {
    await rt.close({ graceMs: 0 });
    await store.close();
  }
}
