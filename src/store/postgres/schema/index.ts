/** The PostgreSQL schema: its migrations, one numbered file each, in the order they apply. */
import { migration as v01 } from './01-tables.ts';
import { migration as v02 } from './02-keel-append.ts';
import { migration as v03 } from './03-lighter-append.ts';
import { migration as v04 } from './04-runs-ended.ts';
import { migration as v05 } from './05-waits.ts';
import { migration as v06 } from './06-schedules.ts';
import { migration as v07 } from './07-webhooks.ts';
import { migration as v08 } from './08-limits.ts';
import { migration as v09 } from './09-due-runs.ts';
import { migration as v10 } from './10-webhook-columns.ts';
import { migration as v11 } from './11-run-tenants.ts';
import { migration as v12 } from './12-rerun-of.ts';
import { migration as v13 } from './13-datasets-batches.ts';
import { migration as v14 } from './14-run-webhooks.ts';
import { migration as v15 } from './15-retention.ts';
import { migration as v16 } from './16-blob-media-types.ts';
import { migration as v17 } from './17-tenants-registry.ts';
import { migration as v18 } from './18-quotas.ts';
import { migration as v19 } from './19-erasures.ts';
import { migration as v21 } from './21-append-many.ts';
import { migration as v22 } from './22-run-status-deltas.ts';
import type { PostgresMigration } from './migration.ts';

export type { PostgresMigration } from './migration.ts';

export const migrations: readonly PostgresMigration[] = [
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
  v21,
  v22,
];
