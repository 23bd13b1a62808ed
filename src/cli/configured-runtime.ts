/**
 * A runtime for a one-off command on the database (`keel erase`, `keel sessions erase`, `keel
 * retention`, `keel usage`, `keel eval`): the configuration's agents and every setting of it that
 * decides what such a command does (compaction, provider limits, quotas, large payloads, retention
 * and its archive stores), so that each command sees the store as `keel serve` and `keel worker` do.
 */
import type { LoadedConfig } from '../config/index.ts';
import { createRuntime, type Runtime, type RuntimeOptions } from '../runs/index.ts';
import type { Store } from '../store/index.ts';

export function configuredRuntime(store: Store, config: LoadedConfig, extra: Partial<RuntimeOptions> = {}): Runtime {
  return createRuntime({
    store,
    agents: config.agents,
    compaction: config.compaction,
    ...(config.providerLimits ? { limits: config.providerLimits } : {}),
    ...(config.priorities ? { priorities: config.priorities } : {}),
    ...(config.quotas ? { quotas: config.quotas } : {}),
    ...(config.largePayloads ? { largePayloads: config.largePayloads } : {}),
    ...(config.retention ? { retention: config.retention } : {}),
    ...extra,
  });
}
