/** The SQLite schema: its migrations, one numbered file each, in the order they apply. */
import { migration as v01 } from './01-sessions-events-blobs-snapshots.ts';
import { migration as v02 } from './02-runs-inputs-keys-idempotency.ts';
import { migration as v03 } from './03-tenants.ts';
import { migration as v04 } from './04-last-turn.ts';
import { migration as v05 } from './05-event-batches.ts';
import { migration as v06 } from './06-queued-behind.ts';
import { migration as v07 } from './07-run-status-counts.ts';
import { migration as v08 } from './08-blob-refs.ts';
import { migration as v09 } from './09-runs-ended.ts';
import { migration as v10 } from './10-waits.ts';
import { migration as v11 } from './11-schedules.ts';
import { migration as v12 } from './12-webhooks.ts';
import { migration as v13 } from './13-limits.ts';
import { migration as v14 } from './14-lean-rows.ts';
import { migration as v15 } from './15-lean-rows-guard.ts';
import { migration as v16 } from './16-zstd-codec.ts';
import { migration as v17 } from './17-head-in-open-rows.ts';
import { migration as v18 } from './18-due-runs.ts';
import { migration as v19 } from './19-webhook-columns.ts';
import { migration as v20 } from './20-run-tenants.ts';
import { migration as v21 } from './21-rerun-of.ts';
import { migration as v22 } from './22-datasets-batches.ts';
import { migration as v23 } from './23-run-webhooks.ts';
import { migration as v24 } from './24-retention.ts';
import { migration as v25 } from './25-blob-media-types.ts';
import { migration as v26 } from './26-tenants-registry.ts';
import { migration as v27 } from './27-quotas.ts';
import { migration as v28 } from './28-erasures.ts';
import type { SqliteMigration } from './migration.ts';

export type { SqliteMigration } from './migration.ts';

export const migrations: readonly SqliteMigration[] = [
  v01,
  v02,
  v03,
  v04,
  v05,
  v06,
  v07,
  v08,
  v09,
  v10,
  v11,
  v12,
  v13,
  v14,
  v15,
  v16,
  v17,
  v18,
  v19,
  v20,
  v21,
  v22,
  v23,
  v24,
  v25,
  v26,
  v27,
  v28,
];
