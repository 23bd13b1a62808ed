/**
 * The port's layout: each namespace's operations and the name each had in the flat port before
 * (issue 39, move 2). Backends that implement the operations flat compose the namespaces from it
 * (`namespaced`); the codemod at /work/codemods/namespace-store.mjs carries the same map.
 */
import type { StoreOps } from './index.ts';

/** Namespace → operation → its former flat name. */
export const STORE_LAYOUT = {
  sessions: {
    create: 'createSession',
    get: 'getSession',
    list: 'listSessions',
    update: 'updateSession',
    erase: 'eraseSession',
  },
  events: {
    append: 'append',
    read: 'readEvents',
    entries: 'getEntries',
    ancestors: 'ancestors',
    seal: 'sealEvents',
    putBlobs: 'putBlobs',
    getBlobs: 'getBlobs',
    blobInfo: 'blobInfo',
    blobHead: 'blobHead',
    blobTenant: 'blobTenant',
    putSnapshot: 'putSnapshot',
    getSnapshot: 'getSnapshot',
  },
  runs: {
    create: 'createRun',
    get: 'getRun',
    list: 'listRuns',
    active: 'activeRun',
    countByStatus: 'countRunsByStatus',
    usageTotals: 'usageTotals',
    update: 'updateRun',
    putCheckpoint: 'putCheckpoint',
    getCheckpoint: 'getCheckpoint',
  },
  claims: { claim: 'claimRun', renewLease: 'renewLease', due: 'dueRuns' },
  inputs: { add: 'addInput', take: 'takeInputs', list: 'listInputs', remove: 'removeInput', count: 'countInputs' },
  keys: { create: 'createApiKey', find: 'findApiKey', list: 'listApiKeys', revoke: 'revokeApiKey' },
  tenants: { put: 'putTenant', get: 'getTenant', list: 'listTenants', delete: 'deleteTenant' },
  idempotency: { get: 'getIdempotency', put: 'putIdempotency', prune: 'pruneIdempotency' },
  schedules: {
    create: 'createSchedule',
    get: 'getSchedule',
    list: 'listSchedules',
    update: 'updateSchedule',
    delete: 'deleteSchedule',
    due: 'dueSchedules',
    addFire: 'addScheduleFire',
    listFires: 'listScheduleFires',
  },
  webhooks: {
    create: 'createWebhook',
    get: 'getWebhook',
    list: 'listWebhooks',
    forRun: 'listRunWebhooks',
    update: 'updateWebhook',
    rotateSecret: 'rotateWebhookSecret',
    delete: 'deleteWebhook',
    forSession: 'webhooksForSession',
    addDeliveries: 'addWebhookDeliveries',
    getDelivery: 'getWebhookDelivery',
    listDeliveries: 'listWebhookDeliveries',
    listAttempts: 'listWebhookAttempts',
    hasDueDeliveries: 'hasDueWebhookDeliveries',
    claimDeliveries: 'claimWebhookDeliveries',
    recordAttempt: 'recordWebhookAttempt',
    hasExpiredDeliveries: 'hasExpiredWebhookDeliveries',
    pruneDeliveries: 'pruneWebhookDeliveries',
    redeliver: 'redeliverWebhook',
  },
  waits: {
    putSignal: 'putSignal',
    getSignal: 'getSignal',
    consumeSignal: 'consumeSignal',
    countSignals: 'countSignals',
    putCallback: 'putCallback',
    findCallback: 'findCallback',
  },
  limits: {
    acquire: 'acquireLimit',
    release: 'releaseLimit',
    renew: 'renewLimit',
    settle: 'settleLimit',
    pause: 'pauseLimit',
    leaveQueue: 'leaveLimitQueue',
    state: 'limitState',
  },
  // Namespaces added after move 2 had no flat names before: theirs are what the backends write.
  datasets: {
    create: 'createDataset',
    get: 'getDataset',
    list: 'listDatasets',
    items: 'listDatasetItems',
    item: 'getDatasetItem',
    delete: 'deleteDataset',
  },
  batches: {
    create: 'createBatch',
    get: 'getBatch',
    list: 'listBatches',
    counts: 'countBatchItems',
    items: 'listBatchItems',
    item: 'getBatchItem',
    claim: 'claimBatchItem',
    renew: 'renewBatchItem',
    setRun: 'setBatchItemRun',
    finish: 'finishBatchItem',
    addScores: 'addBatchItemScores',
    cancel: 'cancelBatch',
  },
  quotas: { reserve: 'reserveQuota', settle: 'settleQuota', release: 'releaseQuota', usage: 'quotaUsage' },
  erasure: {
    sessions: 'erasableSessions',
    eraseTenant: 'eraseTenantData',
    record: 'recordErasure',
    list: 'listErasures',
    scan: 'scanForRemnants',
    purge: 'purgeErased',
  },
  retention: {
    idleSessions: 'idleSessions',
    moveToArchive: 'moveToArchive',
    archiveOf: 'archiveOf',
    archived: 'listArchivedSessions',
    restored: 'restoredFromArchive',
    forgetArchive: 'forgetArchive',
    prune: 'pruneTable',
    countPrunable: 'countPrunable',
    lead: 'leadRetention',
    resign: 'resignRetention',
    getPolicy: 'getRetentionPolicy',
    listPolicies: 'listRetentionPolicies',
    putPolicy: 'putRetentionPolicy',
    deletePolicy: 'deleteRetentionPolicy',
  },
} as const;

export type Namespace = keyof typeof STORE_LAYOUT;
/** The former flat name of every operation. */
export type FlatName = { [N in Namespace]: (typeof STORE_LAYOUT)[N][keyof (typeof STORE_LAYOUT)[N]] }[Namespace];
/** Every operation of the port keyed by its former flat name (how backends write them). */
export type FlatOps = { [K in FlatName]: FlatOp<K> };
type OpOf<N extends Namespace, K> = {
  [O in keyof (typeof STORE_LAYOUT)[N]]: (typeof STORE_LAYOUT)[N][O] extends K ? O : never;
}[keyof (typeof STORE_LAYOUT)[N]];
type FlatOp<K> = {
  [N in Namespace]: OpOf<N, K> extends never ? never : StoreOps[N][OpOf<N, K> & keyof StoreOps[N]];
}[Namespace];

/**
 * The namespaces over flat operations: `store.runs.get` calls `op('getRun')`'s function. Each
 * namespace is a plain object of closures (no `this`): its functions can be passed around, spied
 * on or replaced like any property.
 */
export function namespaced(op: (flat: FlatName) => (...args: never[]) => unknown): StoreOps {
  const out: Record<string, Record<string, unknown>> = {};
  for (const [ns, ops] of Object.entries(STORE_LAYOUT)) {
    const space: Record<string, unknown> = (out[ns] = {});
    for (const [name, flat] of Object.entries(ops)) space[name] = op(flat as FlatName);
  }
  return out as unknown as StoreOps;
}

/** The flat operations of one namespace (what a backend's file for that concept writes). */
export type FlatOpsOf<N extends Namespace> = Pick<
  FlatOps,
  Extract<(typeof STORE_LAYOUT)[N][keyof (typeof STORE_LAYOUT)[N]], FlatName>
>;
