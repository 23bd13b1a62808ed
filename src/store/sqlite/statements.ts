import type Database from 'better-sqlite3';
import type { RunStatus } from '../port/index.ts';
import type { IdKey } from './id-keys.ts';
import { OPEN_CODECS_SQL } from './event-batch-codec.ts';
import {
  TERMINAL_SQL,
  type BatchRow,
  type CheckpointRow,
  type IdempotencyRow,
  type InputRow,
  type KeyRow,
  type RunRow,
  type SessionRow,
  type SnapshotRow,
} from '../rows.ts';

/** A prepared statement taking parameters P and returning rows R (the part of better-sqlite3's the operations use). */
export interface Statement<P extends unknown[] = unknown[], R = unknown> {
  readonly source: string;
  run(...params: P): Database.RunResult;
  get(...params: P): R | undefined;
  all(...params: P): R[];
  iterate(...params: P): IterableIterator<R>;
}

/** A run's model as `provider:modelId` from its agent spec (null when it names none). */
const MODEL_SQL =
  "json_extract(r.agent_spec, '$.model.provider') || ':' || json_extract(r.agent_spec, '$.model.modelId')";
const own = (field: string) =>
  `coalesce(json_extract(r.usage, '$.${field}'), 0) - coalesce(sum(json_extract(c.usage, '$.${field}')), 0)`;

/**
 * usageTotals' runs (see StoreOps.usageTotals): one row per run that ended in [@from, @to), with
 * its tenant, agent, model, end and its own usage: its recorded usage minus that of its ended
 * children (whose recorded usage its own row includes). Followed by the grouping (rows.ts
 * `usageGroupSql`).
 */
export const USAGE_OWN_SQL = `WITH own AS (
  SELECT s.tenant AS tenant, r.agent_name AS agent, ${MODEL_SQL} AS model, r.ended_at AS ended_at,
         ${own('inputTokens')} AS input_tokens, ${own('outputTokens')} AS output_tokens,
         ${own('cachedInputTokens')} AS cached_tokens, ${own('reasoningTokens')} AS reasoning_tokens,
         r.cost - coalesce(sum(c.cost), 0) AS cost
  FROM runs r
  JOIN sessions s ON s.id = r.session_id
  LEFT JOIN runs c ON c.parent_run_id = r.id AND c.ended_at IS NOT NULL
  WHERE r.ended_at >= @from AND r.ended_at < @to
    AND (@tenant IS NULL OR s.tenant = @tenant) AND (@agent IS NULL OR r.agent_name = @agent) AND (@model IS NULL OR ${MODEL_SQL} = @model)
  GROUP BY r.id
)
`;

/** What the sessions row says of a session's head. */
export type SessionHeadRow = {
  last_seq: number;
  leaf_id: string | null;
  last_turn: number;
  sealed_seq: number;
  erased_at: number | null;
};

/**
 * The last open row written after the sessions row's head (ADR-0026): an append leaves the head in
 * its open row, so this row, if any, says where the head is now. All null when there is none.
 */
export type OpenHeadColumns = { open_last_seq: number | null; open_leaf_id: string | null; open_turn: number | null };
/** The last open row of the session whose log key is the parameter, among those that start after `afterSeq` (an SQL expression). */
const lastOpenRowAfter = (columns: string, afterSeq: string) =>
  `SELECT ${columns} FROM event_batches WHERE session_id = ? AND first_seq > ${afterSeq} AND codec IN ${OPEN_CODECS_SQL} ORDER BY first_seq DESC LIMIT 1`;
/** Joined to `sessions s`, with the session's log key as a parameter (before those of the WHERE clause). */
const OPEN_HEAD_JOIN = `LEFT JOIN event_batches o ON o.rowid = (${lastOpenRowAfter('rowid', 's.last_seq')})`;
const OPEN_HEAD_COLUMNS = 'o.last_seq AS open_last_seq, o.leaf_id AS open_leaf_id, o.turn AS open_turn';

/** The statements the operations run, prepared once per connection. */
export type Statements = ReturnType<typeof prepareStatements>;

export function prepareStatements(db: Database.Database) {
  const prepare = <P extends unknown[] = unknown[], R = unknown>(sql: string): Statement<P, R> => db.prepare<P, R>(sql);
  return {
    insertSession: prepare(
      `INSERT INTO sessions (id, tenant, created_at, title, metadata, agent, origin_session_id, origin_entry_id)
       VALUES (@id, @tenant, @created_at, @title, @metadata, @agent, @origin_session_id, @origin_entry_id)`,
    ),
    getSession: prepare<[IdKey, string], SessionRow & OpenHeadColumns>(
      `SELECT s.*, ${OPEN_HEAD_COLUMNS} FROM sessions s ${OPEN_HEAD_JOIN} WHERE s.id = ?`,
    ),
    listSessions: prepare<[string, number, number], SessionRow>(
      'SELECT * FROM sessions WHERE id > ? AND (archived_at IS NULL OR ?) ORDER BY id LIMIT ?',
    ),
    // From the index of the tenant's sessions (one statement for both, `? IS NULL OR tenant = ?`, reads every tenant's in id order).
    listTenantSessions: prepare<[string, string, number, number], SessionRow>(
      'SELECT * FROM sessions WHERE tenant = ? AND id > ? AND (archived_at IS NULL OR ?) ORDER BY id LIMIT ?',
    ),
    insertKey: prepare(
      'INSERT INTO api_keys (id, tenant, name, hash, prefix, rate_per_minute, created_at, revoked_at, scope, quotas) VALUES (@id, @tenant, @name, @hash, @prefix, @rate_per_minute, @created_at, @revoked_at, @scope, @quotas)',
    ),
    findKey: prepare<[string], KeyRow>('SELECT * FROM api_keys WHERE hash = ?'),
    listKeys: prepare<[string | null, string | null], KeyRow>(
      'SELECT * FROM api_keys WHERE (? IS NULL OR tenant = ?) ORDER BY created_at, id',
    ),
    revokeKey: prepare('UPDATE api_keys SET revoked_at = COALESCE(revoked_at, ?) WHERE id = ?'),
    getIdem: prepare<[string, string], IdempotencyRow>('SELECT * FROM idempotency_keys WHERE tenant = ? AND key = ?'),
    putIdem: prepare(
      'INSERT INTO idempotency_keys (tenant, key, fingerprint, status, body, created_at) VALUES (?, ?, ?, ?, ?, ?) ' +
        'ON CONFLICT (tenant, key) DO UPDATE SET status = excluded.status, body = excluded.body ' +
        'WHERE idempotency_keys.status = 0 AND excluded.status <> 0 AND idempotency_keys.fingerprint = excluded.fingerprint',
    ),
    pruneIdem: prepare('DELETE FROM idempotency_keys WHERE created_at < ?'),
    // The head into the sessions row: at a seal, and before an erasure (ADR-0026); an append alone leaves it in its open row.
    setHead: prepare<[number, string | null, number, number, string]>(
      'UPDATE sessions SET last_seq = ?, leaf_id = ?, last_turn = max(last_turn, ?), sealed_seq = ? WHERE id = ?',
    ),
    updateSession: prepare('UPDATE sessions SET title = ?, metadata = ?, archived_at = ? WHERE id = ?'),
    // The log (ADR-0009): rows of consecutive events, open (JSON) or sealed (compressed); entries by id.
    insertBatch: prepare<[IdKey, number, number, number, string | Buffer]>(
      'INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data) VALUES (?, ?, ?, ?, ?)',
    ),
    // An append's open row, with the session's head after it (leaf and last turn; ADR-0026).
    insertOpenRow: prepare<[IdKey, number, number, number, string, string | null, number]>(
      'INSERT INTO event_batches (session_id, first_seq, last_seq, codec, data, leaf_id, turn) VALUES (?, ?, ?, ?, ?, ?, ?)',
    ),
    // The last open row written after the sessions row's head, if any: where the head is now (ADR-0026).
    openHead: prepare<
      [IdKey, number],
      { open_last_seq: number; open_leaf_id: string | null; open_turn: number | null }
    >(lastOpenRowAfter('last_seq AS open_last_seq, leaf_id AS open_leaf_id, turn AS open_turn', '?')),
    // Entries are indexed when their turn is sealed (ADR-0022); rows of open rows written before are there already.
    indexEntry: prepare<[IdKey, IdKey, number, IdKey | null]>(
      'INSERT OR IGNORE INTO entries (id, session_id, seq, parent_id) VALUES (?, ?, ?, ?)',
    ),
    // What an append needs of its session: its position in the log and the tree, and where its open rows start.
    // With the last open row after the sessions row's head, which may have moved it (ADR-0026).
    sessionHead: prepare<[IdKey, string], SessionHeadRow & OpenHeadColumns>(
      `SELECT s.last_seq, s.leaf_id, s.last_turn, s.sealed_seq, s.erased_at, ${OPEN_HEAD_COLUMNS} FROM sessions s ${OPEN_HEAD_JOIN} WHERE s.id = ?`,
    ),
    // The same for a fenced append, with the fencing token of its run (null for no such run): one statement, not two.
    fencedSessionHead: prepare<
      [string, IdKey, string],
      SessionHeadRow & OpenHeadColumns & { fencing_token: number | null }
    >(
      `SELECT s.last_seq, s.leaf_id, s.last_turn, s.sealed_seq, s.erased_at, (SELECT fencing_token FROM runs WHERE id = ?) AS fencing_token, ${OPEN_HEAD_COLUMNS}
       FROM sessions s ${OPEN_HEAD_JOIN} WHERE s.id = ?`,
    ),
    insertBlobRef: prepare<[IdKey, string]>('INSERT OR IGNORE INTO blob_refs (session_id, hash) VALUES (?, ?)'),
    // Erasure (see eraseSession): in this order, inside one transaction.
    liveRun: prepare<[string], { id: string }>(
      `SELECT id FROM runs WHERE session_id = ? AND status NOT IN (${TERMINAL_SQL}) LIMIT 1`,
    ),
    runsOfSession: prepare<[string], { usage: string; cost: number }>(
      'SELECT usage, cost FROM runs WHERE session_id = ?',
    ),
    markErasing: prepare<[IdKey]>('INSERT OR IGNORE INTO erased_logs (session_id) VALUES (?)'),
    eraseBatches: prepare<[IdKey]>('DELETE FROM event_batches WHERE session_id = ?'),
    eraseEntries: prepare<[IdKey]>('DELETE FROM entries WHERE session_id = ?'),
    eraseSnapshots: prepare<[string]>('DELETE FROM snapshots WHERE session_id = ?'),
    eraseCheckpoints: prepare<[string]>(
      'DELETE FROM run_checkpoints WHERE run_id IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    eraseInputs: prepare<[string]>('DELETE FROM run_inputs WHERE session_id = ?'),
    eraseSignals: prepare<[string]>(
      'DELETE FROM run_signals WHERE run_id IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    eraseCallbacks: prepare<[string]>(
      'DELETE FROM run_callbacks WHERE run_id IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    eraseScheduleFires: prepare<[string, string]>(
      'DELETE FROM schedule_fires WHERE session_id = ? OR run_id IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    // The schedules that target it take no message from now on: paused, saying why (they keep its id, as its tombstone does).
    pauseTargetSchedules: prepare<[number, string, number, string]>(
      "UPDATE schedules SET paused_at = coalesce(paused_at, ?), paused_reason = ?, next_fire_at = NULL, updated_at = ? WHERE json_extract(target, '$.sessionId') = ?",
    ),
    scrubRuns: prepare<[string]>(
      // The model stays, for billing (usageTotals groups by it).
      `UPDATE runs SET agent_spec = CASE WHEN json_type(agent_spec, '$.model') IS NULL THEN '{}' ELSE json_object('model', json(agent_spec -> '$.model')) END,
                       options = '{}', error = NULL, waiting = NULL, trigger_message_id = NULL, parent_tool_call_id = NULL WHERE session_id = ?`,
    ),
    eraseOwnBlobs: prepare<[IdKey, IdKey]>(
      'DELETE FROM blobs WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = ?) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blobs.hash AND r.session_id <> ?)',
    ),
    eraseOwnBlobHeads: prepare<[IdKey, IdKey]>(
      'DELETE FROM blob_heads WHERE hash IN (SELECT hash FROM blob_refs WHERE session_id = ?) AND NOT EXISTS (SELECT 1 FROM blob_refs r WHERE r.hash = blob_heads.hash AND r.session_id <> ?)',
    ),
    eraseBlobRefs: prepare<[IdKey]>('DELETE FROM blob_refs WHERE session_id = ?'),
    eraseIdempotency: prepare<[string]>('DELETE FROM idempotency_keys WHERE instr(body, ?) > 0'),
    // The session's webhook deliveries (their bodies describe its runs), their attempts first.
    eraseWebhookAttempts: prepare<[string]>(
      'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE session_id = ?)',
    ),
    eraseWebhookDeliveries: prepare<[string]>('DELETE FROM webhook_deliveries WHERE session_id = ?'),
    // Its runs' own subscriptions (A2A push notification configs: a URL and credentials the client gave).
    eraseRunWebhooks: prepare<[string]>(
      'DELETE FROM webhooks WHERE run_id IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    // The dataset items and batch items copied from it (issue 40). A batch whose unfinished items
    // were all its is completed first: nothing would finish it once they are gone.
    eraseDatasetItems: prepare<[string]>('DELETE FROM dataset_items WHERE source_session_id = ?'),
    completeBatchesLeftDone: prepare<[number, string, string]>(
      `UPDATE batches SET status = 'completed', ended_at = ?
       WHERE status = 'running' AND id IN (SELECT batch_id FROM batch_items WHERE source_session_id = ?)
         AND NOT EXISTS (SELECT 1 FROM batch_items i WHERE i.status IN ('pending', 'running') AND i.batch_id = batches.id AND i.source_session_id IS NOT ?)`,
    ),
    eraseBatchItems: prepare<[string]>('DELETE FROM batch_items WHERE source_session_id = ?'),
    // What other rows say of it (ADR-0041): their links to it go, so that a scan finds it only in its tombstone.
    eraseLooseWebhookAttempts: prepare<[string]>(
      'DELETE FROM webhook_attempts WHERE delivery_id IN (SELECT id FROM webhook_deliveries WHERE session_id IS NULL AND instr(body, ?) > 0)',
    ),
    eraseLooseWebhookDeliveries: prepare<[string]>(
      'DELETE FROM webhook_deliveries WHERE session_id IS NULL AND instr(body, ?) > 0',
    ),
    unlinkForks: prepare<[string]>(
      'UPDATE sessions SET origin_session_id = NULL, origin_entry_id = NULL WHERE origin_session_id = ?',
    ),
    unlinkReruns: prepare<[string, string]>(
      'UPDATE runs SET rerun_of = NULL WHERE session_id <> ? AND rerun_of IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    unlinkScheduleRuns: prepare<[string]>(
      'UPDATE schedules SET last_run_id = NULL WHERE last_run_id IN (SELECT id FROM runs WHERE session_id = ?)',
    ),
    // A dataset made of its runs lists them in its source: they leave the list.
    unlinkDatasetSources: prepare<[string, string]>(
      `UPDATE datasets SET source = json_set(source, '$.runs', json((SELECT json_group_array(value) FROM json_each(datasets.source, '$.runs') WHERE value NOT IN (SELECT id FROM runs WHERE session_id = ?))))
       WHERE json_type(source, '$.runs') = 'array'
         AND EXISTS (SELECT 1 FROM json_each(datasets.source, '$.runs') WHERE value IN (SELECT id FROM runs WHERE session_id = ?))`,
    ),
    // By its runs (batch_items_run), not by status (`+status`: the claim index would scan every finished item).
    scrubBatchItemResults: prepare<[string]>(
      `UPDATE batch_items SET result = NULL, error = NULL, run_id = NULL
       WHERE run_id IN (SELECT id FROM runs WHERE session_id = ?) AND +status IN ('done', 'failed')`,
    ),
    tombstone: prepare<[number, string, string]>(
      "UPDATE sessions SET title = NULL, metadata = '{}', agent = NULL, leaf_id = NULL, origin_session_id = NULL, origin_entry_id = NULL, erased_at = ?, erased_totals = ? WHERE id = ?",
    ),
    // As bytes (a BLOB): a seal joins them without decoding them (see sealLean).
    openRows: prepare<[IdKey, number], { first_seq: number; codec: number; data: Buffer }>(
      `SELECT first_seq, codec, CAST(data AS BLOB) AS data FROM event_batches WHERE session_id = ? AND first_seq > ? AND codec IN ${OPEN_CODECS_SQL} ORDER BY first_seq`,
    ),
    // Only once the sealed row holding them is in (the table's trigger checks).
    deleteOpenRows: prepare<[IdKey, number]>(
      `DELETE FROM event_batches WHERE session_id = ? AND first_seq > ? AND codec IN ${OPEN_CODECS_SQL}`,
    ),
    // The batches holding seqs from..until: from the one that holds `from` on.
    readBatches: prepare<[{ session: IdKey; from: number; until: number }], BatchRow>(
      `SELECT first_seq, codec, data FROM event_batches
       WHERE session_id = @session AND first_seq <= @until
         AND first_seq >= coalesce((SELECT first_seq FROM event_batches WHERE session_id = @session AND first_seq <= @from ORDER BY first_seq DESC LIMIT 1), 0)
       ORDER BY first_seq`,
    ),
    // The batch holding one seq.
    batchAt: prepare<[IdKey, number], BatchRow>(
      'SELECT first_seq, codec, data FROM event_batches WHERE session_id = ? AND first_seq <= ? ORDER BY first_seq DESC LIMIT 1',
    ),
    runFirstSeq: prepare<[string], { first_seq: number | null }>('SELECT first_seq FROM runs WHERE id = ?'),
    getEntry: prepare<[IdKey, IdKey], { seq: number }>('SELECT seq FROM entries WHERE id = ? AND session_id = ?'),
    // Every step of the walk stays inside the session, even if a parent id points elsewhere.
    ancestors: prepare<[{ session: IdKey; from: IdKey; limit: number }], { seq: number }>(
      `WITH RECURSIVE path(id, parent_id, seq, depth) AS (
         SELECT id, parent_id, seq, 0 FROM entries WHERE id = @from AND session_id = @session AND @limit > 0
         UNION ALL
         SELECT e.id, e.parent_id, e.seq, p.depth + 1 FROM path p JOIN entries e ON e.id = p.parent_id AND e.session_id = @session
         WHERE p.depth + 1 < @limit
       )
       SELECT seq FROM path ORDER BY depth`,
    ),
    putBlob: prepare<[string, string, number, number, string | null, string | null]>(
      'INSERT INTO blobs (hash, data, size, created_at, media_type, encoding) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (hash) DO NOTHING',
    ),
    getBlob: prepare<[string], { data: string }>('SELECT data FROM blobs WHERE hash = ?'),
    blobInfo: prepare<[string], { size: number; media_type: string | null; encoding: string | null }>(
      'SELECT size, media_type, encoding FROM blobs WHERE hash = ?',
    ),
    blobHead: prepare<[number, string], { head: string }>(
      'SELECT substr(data, 1, ?) AS head FROM blobs WHERE hash = ?',
    ),
    putBlobHead: prepare<[string, string]>(
      'INSERT INTO blob_heads (hash, head) VALUES (?, ?) ON CONFLICT (hash) DO NOTHING',
    ),
    blobHeadKept: prepare<[number, string], { head: string }>(
      'SELECT substr(head, 1, ?) AS head FROM blob_heads WHERE hash = ?',
    ),
    // blob_refs keys a canonical UUID as its 16 bytes (id-keys.ts): turned back into its text to meet sessions.id.
    blobTenant: prepare<[string, string], { one: number }>(
      `SELECT 1 AS one FROM blob_refs r JOIN sessions s ON s.id = CASE WHEN typeof(r.session_id) = 'blob'
         THEN lower(substr(hex(r.session_id), 1, 8) || '-' || substr(hex(r.session_id), 9, 4) || '-' ||
           substr(hex(r.session_id), 13, 4) || '-' || substr(hex(r.session_id), 17, 4) || '-' || substr(hex(r.session_id), 21))
         ELSE r.session_id END
       WHERE r.hash = ? AND s.tenant = ? LIMIT 1`,
    ),
    putSnapshot: prepare(
      `INSERT INTO snapshots (session_id, projection, version, as_of_seq, leaf_id, state, created_at)
       VALUES (@session_id, @projection, @version, @as_of_seq, @leaf_id, @state, @created_at)
       ON CONFLICT (session_id, projection, version) DO UPDATE SET
         as_of_seq = excluded.as_of_seq, leaf_id = excluded.leaf_id, state = excluded.state, created_at = excluded.created_at
       WHERE excluded.as_of_seq >= snapshots.as_of_seq`,
    ),
    insertRun: prepare(
      `INSERT INTO runs (id, session_id, parent_run_id, parent_tool_call_id, rerun_of, agent_name, agent_version, agent_spec, status,
                         trigger_message_id, turn, created_at, deadline_at, options, usage, queued_behind, first_seq, tenant)
       VALUES (@id, @session_id, @parent_run_id, @parent_tool_call_id, @rerun_of, @agent_name, @agent_version, @agent_spec, 'queued',
               @trigger_message_id, @turn, @created_at, @deadline_at, @options, @usage, @queued_behind, @first_seq,
               (SELECT tenant FROM sessions WHERE id = @session_id))
       RETURNING *`,
    ),
    getRun: prepare<[string], RunRow>('SELECT * FROM runs WHERE id = ?'),
    activeRun: prepare<[string], RunRow>(
      `SELECT * FROM runs WHERE session_id = ? AND status NOT IN (${TERMINAL_SQL}) AND queued_behind = 0`,
    ),
    runStatusCounts: prepare<[], { status: RunStatus; n: number }>('SELECT status, n FROM run_status_counts'),
    fenceOf: prepare<[string], { fencing_token: number }>('SELECT fencing_token FROM runs WHERE id = ?'),
    renew: prepare(
      `UPDATE runs SET lease_expires_at = ? WHERE id = ? AND lease_owner = ? AND fencing_token = ? AND status NOT IN (${TERMINAL_SQL})`,
    ),
    putCheckpoint: prepare(
      `INSERT INTO run_checkpoints (run_id, step, seq, state, created_at) VALUES (?, ?, ?, ?, ?)
       ON CONFLICT (run_id) DO UPDATE SET step = excluded.step, seq = excluded.seq, state = excluded.state, created_at = excluded.created_at`,
    ),
    getCheckpoint: prepare<[string], CheckpointRow>('SELECT step, seq, state FROM run_checkpoints WHERE run_id = ?'),
    addInput: prepare(
      'INSERT INTO run_inputs (id, session_id, kind, run_id, payload, created_at) VALUES (?, ?, ?, ?, ?, ?)',
    ),
    takeInputs: prepare<[string, string, number, string | null, string | null], InputRow>(
      `SELECT * FROM run_inputs WHERE session_id = ? AND kind = ? AND (? = 0 OR run_id IS ? OR run_id = ?)
       ORDER BY created_at, id`,
    ),
    deleteInput: prepare('DELETE FROM run_inputs WHERE id = ?'),
    runEnded: prepare<[string], { one: number }>(
      `SELECT 1 AS one FROM runs WHERE id = ? AND status IN (${TERMINAL_SQL})`,
    ),
    countInputs: prepare<[string, string], { n: number }>(
      'SELECT count(*) AS n FROM run_inputs WHERE session_id = ? AND kind = ?',
    ),
    getSnapshot: prepare<[string, string, number], SnapshotRow>(
      'SELECT as_of_seq, leaf_id, state FROM snapshots WHERE session_id = ? AND projection = ? AND version = ?',
    ),
  };
}
