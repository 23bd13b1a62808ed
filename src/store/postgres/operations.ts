/** Every PostgreSQL operation of the port, flat (see STORE_LAYOUT): composed from one file per concept. */
import { pgSessionsOps } from './sessions.ts';
import { pgEventsOps } from './events.ts';
import { pgRunsOps } from './runs.ts';
import { pgClaimsOps } from './claims.ts';
import { pgInputsOps } from './inputs.ts';
import { pgKeysOps } from './keys.ts';
import { pgTenantsOps } from './tenants.ts';
import { pgIdempotencyOps } from './idempotency.ts';
import { pgWebhookOperations } from './webhooks.ts';
import { pgWaitOperations } from './waits.ts';
import { pgLimitOperations } from './limits.ts';
import { scheduleOperations } from './schedules.ts';
import { pgDatasetsOps } from './datasets.ts';
import { pgBatchesOps } from './batches.ts';
import { pgQuotasOps } from './quotas.ts';
import { pgErasureOps } from './erasure.ts';
import { pgRetentionOps } from './retention.ts';
import type { PgOps } from './context.ts';

export const pgOperations: PgOps = {
  ...pgSessionsOps,
  ...pgEventsOps,
  ...pgRunsOps,
  ...pgClaimsOps,
  ...pgInputsOps,
  ...pgKeysOps,
  ...pgTenantsOps,
  ...pgIdempotencyOps,
  ...pgWebhookOperations,
  ...pgWaitOperations,
  ...pgLimitOperations,
  ...scheduleOperations,
  ...pgDatasetsOps,
  ...pgBatchesOps,
  ...pgQuotasOps,
  ...pgErasureOps,
  ...pgRetentionOps,
};
