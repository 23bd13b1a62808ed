import type pg from 'pg';
import { SchemaVersionError } from '../port/index.ts';
import { WEBHOOKS_MIGRATION_2_SQL, WEBHOOKS_MIGRATION_SQL } from './webhooks.ts';
import { schedulesDdl } from '../schedule-rows.ts';
import { postgresWaitsMigration } from '../wait-rows.ts';
import { POSTGRES_DUE_RUNS_MIGRATION } from '../due-runs.ts';
import { limitsDdl } from '../limit-rows.ts';
import { RUN_TENANTS_MIGRATION_SQL } from '../run-tenants.ts';

/**
 * Versioned schema migrations for PostgreSQL, applied in order at open, each in its own
 * transaction under an advisory lock (several nodes may start at once). `keel_schema` records the
 * versions applied; a schema written by a newer Keel (a higher version) is refused.
 *
 * The PostgreSQL log stores one row per event (ADR-0011): the server compresses large values itself
 * (TOAST), and a row per event lets concurrent readers and writers lock and index exactly what they
 * touch. The events are the same records as SQLite's (the port's StoredEvent), with `data` as the
 * JSON text the log wrote.
 */
export const migrations: ReadonlyArray<{ version: number; sql: string }> = [
  {
    version: 1,
    sql: `
      CREATE TABLE sessions (
        id text PRIMARY KEY,
        tenant text NOT NULL DEFAULT 'default',
        created_at bigint NOT NULL,
        title text,
        metadata text NOT NULL DEFAULT '{}',
        agent text,
        last_seq bigint NOT NULL DEFAULT 0,
        last_turn integer NOT NULL DEFAULT 0,
        leaf_id text,
        origin_session_id text,
        origin_entry_id text,
        archived_at bigint,
        erased_at bigint,
        erased_totals text
      );
      CREATE INDEX sessions_tenant ON sessions (tenant, id);

      CREATE TABLE events (
        session_id text NOT NULL REFERENCES sessions (id),
        seq bigint NOT NULL,
        id text NOT NULL,
        type text NOT NULL,
        v integer NOT NULL,
        time bigint NOT NULL,
        run_id text,
        turn integer,
        step integer,
        entry boolean NOT NULL,
        parent_id text,
        ignorable boolean NOT NULL DEFAULT false,
        data text NOT NULL,
        PRIMARY KEY (session_id, seq)
      );
      -- The conversation tree: entries by their id, unique within their session.
      CREATE UNIQUE INDEX events_entries ON events (session_id, id) WHERE entry;

      -- The log is append-only: no code path may change or remove an event, except erasure, which
      -- lists the session in erased_logs first, in the erasing transaction.
      CREATE TABLE erased_logs (session_id text PRIMARY KEY);
      CREATE FUNCTION keel_events_immutable() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        IF TG_OP = 'DELETE' AND EXISTS (SELECT 1 FROM erased_logs e WHERE e.session_id = OLD.session_id) THEN
          RETURN OLD;
        END IF;
        RAISE EXCEPTION 'events are immutable' USING ERRCODE = 'restrict_violation';
      END $$;
      CREATE TRIGGER events_immutable BEFORE UPDATE OR DELETE ON events
        FOR EACH ROW EXECUTE FUNCTION keel_events_immutable();

      -- Publication on commit: every append moves its session's last_seq, and this tells the
      -- listeners of the schema's channel (delivered when the transaction commits, never before,
      -- never for a rollback). The payload is small: the session id and its last seq.
      CREATE FUNCTION keel_notify_append() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN
        PERFORM pg_notify('keel_' || TG_TABLE_SCHEMA, json_build_object('s', NEW.id, 'q', NEW.last_seq)::text);
        RETURN NULL;
      END $$;
      CREATE TRIGGER sessions_appended AFTER UPDATE OF last_seq ON sessions
        FOR EACH ROW WHEN (NEW.last_seq <> OLD.last_seq) EXECUTE FUNCTION keel_notify_append();

      CREATE TABLE blobs (
        hash text PRIMARY KEY,
        data text NOT NULL,
        size integer NOT NULL,
        created_at bigint NOT NULL
      );
      -- Which sessions refer to each blob (blobs are shared by content), for erasure.
      CREATE TABLE blob_refs (session_id text NOT NULL, hash text NOT NULL, PRIMARY KEY (session_id, hash));
      CREATE INDEX blob_refs_hash ON blob_refs (hash);

      CREATE TABLE snapshots (
        session_id text NOT NULL REFERENCES sessions (id),
        projection text NOT NULL,
        version integer NOT NULL,
        as_of_seq bigint NOT NULL,
        leaf_id text,
        state text NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (session_id, projection, version)
      );

      CREATE TABLE runs (
        id text PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions (id),
        parent_run_id text REFERENCES runs (id),
        parent_tool_call_id text,
        agent_name text NOT NULL,
        agent_version text NOT NULL,
        agent_spec text NOT NULL,
        status text NOT NULL CHECK (status IN ('queued','running','waiting_approval','waiting_for_user','paused','completed','failed','cancelled','timed_out')),
        queued_behind boolean NOT NULL DEFAULT false,
        trigger_message_id text,
        turn integer,
        created_at bigint NOT NULL,
        started_at bigint,
        ended_at bigint,
        attempt integer NOT NULL DEFAULT 0,
        usage text NOT NULL DEFAULT '{}',
        cost double precision NOT NULL DEFAULT 0,
        error text,
        waiting text,
        lease_owner text,
        lease_expires_at bigint,
        fencing_token bigint NOT NULL DEFAULT 0,
        cancel_requested boolean NOT NULL DEFAULT false,
        pause_requested boolean NOT NULL DEFAULT false,
        deadline_at bigint,
        options text NOT NULL DEFAULT '{}',
        -- A run's events all follow its first one in its session.
        first_seq bigint
      );
      -- At most one active run per session, enforced by the database itself.
      CREATE UNIQUE INDEX runs_one_active ON runs (session_id)
        WHERE status NOT IN ('completed','failed','cancelled','timed_out') AND NOT queued_behind;
      CREATE INDEX runs_claimable ON runs (status, created_at, id);
      CREATE INDEX runs_session ON runs (session_id, id);
      CREATE INDEX runs_parent ON runs (parent_run_id, id) WHERE parent_run_id IS NOT NULL;
      CREATE INDEX runs_queued_behind ON runs (session_id, created_at, id) WHERE queued_behind;

      -- Runs by status, kept by the database as runs are created and move, so that /metrics reads
      -- a few rows, not the runs. Spread over shards by run id: concurrent transitions of
      -- different runs rarely touch the same counter row (one row per status would serialize
      -- every transition of the cluster).
      CREATE TABLE run_status_counts (status text NOT NULL, shard integer NOT NULL, n bigint NOT NULL, PRIMARY KEY (status, shard));
      CREATE FUNCTION keel_count_runs() RETURNS trigger LANGUAGE plpgsql AS $$
      DECLARE
        k integer;
      BEGIN
        IF TG_OP = 'INSERT' THEN
          k := hashtext(NEW.id) & 31;
          INSERT INTO run_status_counts AS c (status, shard, n) VALUES (NEW.status, k, 1)
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + 1;
        ELSIF TG_OP = 'DELETE' THEN
          k := hashtext(OLD.id) & 31;
          UPDATE run_status_counts SET n = n - 1 WHERE status = OLD.status AND shard = k;
        ELSIF NEW.status <> OLD.status THEN
          k := hashtext(NEW.id) & 31;
          UPDATE run_status_counts SET n = n - 1 WHERE status = OLD.status AND shard = k;
          INSERT INTO run_status_counts AS c (status, shard, n) VALUES (NEW.status, k, 1)
            ON CONFLICT (status, shard) DO UPDATE SET n = c.n + 1;
        END IF;
        RETURN NULL;
      END $$;
      CREATE TRIGGER runs_counted AFTER INSERT OR DELETE OR UPDATE OF status ON runs
        FOR EACH ROW EXECUTE FUNCTION keel_count_runs();

      CREATE TABLE run_checkpoints (
        run_id text PRIMARY KEY REFERENCES runs (id),
        step integer NOT NULL,
        seq bigint NOT NULL,
        state text NOT NULL,
        created_at bigint NOT NULL
      );

      CREATE TABLE run_inputs (
        id text PRIMARY KEY,
        session_id text NOT NULL REFERENCES sessions (id),
        kind text NOT NULL CHECK (kind IN ('steer','message')),
        run_id text,
        payload text NOT NULL,
        created_at bigint NOT NULL
      );
      CREATE INDEX run_inputs_session ON run_inputs (session_id, kind, created_at, id);

      CREATE TABLE api_keys (
        id text PRIMARY KEY,
        tenant text NOT NULL,
        name text,
        hash text NOT NULL UNIQUE,
        prefix text NOT NULL,
        rate_per_minute integer,
        created_at bigint NOT NULL,
        revoked_at bigint
      );

      CREATE TABLE idempotency_keys (
        tenant text NOT NULL,
        key text NOT NULL,
        fingerprint text NOT NULL,
        status integer NOT NULL,
        body text NOT NULL,
        created_at bigint NOT NULL,
        PRIMARY KEY (tenant, key)
      );
      CREATE INDEX idempotency_keys_age ON idempotency_keys (created_at);
    `,
  },
  {
    version: 2,
    sql: `
      -- An append in one round trip (the hot path): the fence and the session are locked and
      -- checked, seqs allocated, entries threaded under the leaf, the events, their blob references
      -- and the session's new head written. Refusals carry Keel's own SQLSTATEs (see
      -- operations.ts): KF001 fenced (DETAIL: the current token), KN001 no such session, KE001
      -- erased, KS001 seq conflict (DETAIL: the last seq), KP001 invalid parent (DETAIL: the event
      -- and the parent). Returns each event's seq and parent.
      CREATE FUNCTION keel_append(
        p_session text, p_fence_run text, p_fence_token bigint, p_expect bigint,
        p_ids text[], p_types text[], p_vs integer[], p_times bigint[], p_run_ids text[], p_turns integer[], p_steps integer[],
        p_entries boolean[], p_parents text[], p_has_parent boolean[], p_leaves text[], p_has_leaf boolean[], p_ignorable boolean[],
        p_data text[], p_hashes text[]
      ) RETURNS TABLE (seq bigint, parent_id text) LANGUAGE plpgsql AS $$
      DECLARE
        v_token bigint;
        v_last bigint;
        v_leaf text;
        v_erased bigint;
        v_turn integer := 0;
        v_seqs bigint[] := '{}';
        v_parents text[] := '{}';
        v_seen text[] := '{}';
        v_parent text;
        i integer;
      BEGIN
        IF p_fence_run IS NOT NULL THEN
          SELECT r.fencing_token INTO v_token FROM runs r WHERE r.id = p_fence_run FOR SHARE;
          IF NOT FOUND OR v_token <> p_fence_token THEN
            RAISE EXCEPTION 'fenced' USING ERRCODE = 'KF001', DETAIL = coalesce(v_token::text, '');
          END IF;
        END IF;
        SELECT s.last_seq, s.leaf_id, s.erased_at INTO v_last, v_leaf, v_erased FROM sessions s WHERE s.id = p_session FOR UPDATE;
        IF NOT FOUND THEN RAISE EXCEPTION 'no session' USING ERRCODE = 'KN001'; END IF;
        IF v_erased IS NOT NULL THEN RAISE EXCEPTION 'erased' USING ERRCODE = 'KE001'; END IF;
        IF p_expect IS NOT NULL AND v_last <> p_expect THEN
          RAISE EXCEPTION 'seq conflict' USING ERRCODE = 'KS001', DETAIL = v_last::text;
        END IF;
        FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
          v_last := v_last + 1;
          IF p_turns[i] IS NOT NULL AND p_turns[i] > v_turn THEN v_turn := p_turns[i]; END IF;
          v_parent := NULL;
          IF p_entries[i] THEN
            v_parent := CASE WHEN p_has_parent[i] THEN p_parents[i] ELSE v_leaf END;
            -- The tree never spans sessions: an explicit parent is an entry of this one.
            IF p_has_parent[i] AND p_parents[i] IS NOT NULL AND NOT (p_parents[i] = ANY (v_seen))
               AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = p_session AND e.id = p_parents[i] AND e.entry) THEN
              RAISE EXCEPTION 'invalid parent' USING ERRCODE = 'KP001', DETAIL = p_ids[i] || ' ' || p_parents[i];
            END IF;
            v_seen := v_seen || p_ids[i];
            v_leaf := p_ids[i];
          ELSIF p_has_leaf[i] THEN
            v_leaf := p_leaves[i];
          END IF;
          v_seqs := v_seqs || v_last;
          v_parents := v_parents || v_parent;
        END LOOP;
        IF coalesce(array_length(p_ids, 1), 0) = 0 THEN RETURN; END IF;
        INSERT INTO events (session_id, seq, id, type, v, time, run_id, turn, step, entry, parent_id, ignorable, data)
          SELECT p_session, u.* FROM unnest(v_seqs, p_ids, p_types, p_vs, p_times, p_run_ids, p_turns, p_steps, p_entries, v_parents, p_ignorable, p_data) AS u;
        IF coalesce(array_length(p_hashes, 1), 0) > 0 THEN
          INSERT INTO blob_refs (session_id, hash) SELECT p_session, h FROM unnest(p_hashes) AS h ON CONFLICT DO NOTHING;
        END IF;
        UPDATE sessions s SET last_seq = v_last, leaf_id = v_leaf, last_turn = GREATEST(s.last_turn, v_turn) WHERE s.id = p_session;
        RETURN QUERY SELECT u.seq, u.parent_id FROM unnest(v_seqs, v_parents) AS u(seq, parent_id);
      END $$;
    `,
  },
  {
    version: 3,
    sql: `
      -- The hot path does less in the server (bench:cluster): keel_append notifies the append
      -- itself (the trigger on sessions cost a trigger call per append), and the foreign keys that
      -- re-checked, for every event and every checkpoint, a row the writer already holds go (the
      -- session row is locked by keel_append; a checkpoint is written by the worker holding its
      -- run, under its fence). What they guarded stays guarded by the functions that write.
      DROP TRIGGER sessions_appended ON sessions;
      DROP FUNCTION keel_notify_append();
      ALTER TABLE events DROP CONSTRAINT events_session_id_fkey;
      ALTER TABLE run_checkpoints DROP CONSTRAINT run_checkpoints_run_id_fkey;
      CREATE OR REPLACE FUNCTION keel_append(
        p_session text, p_fence_run text, p_fence_token bigint, p_expect bigint,
        p_ids text[], p_types text[], p_vs integer[], p_times bigint[], p_run_ids text[], p_turns integer[], p_steps integer[],
        p_entries boolean[], p_parents text[], p_has_parent boolean[], p_leaves text[], p_has_leaf boolean[], p_ignorable boolean[],
        p_data text[], p_hashes text[]
      ) RETURNS TABLE (seq bigint, parent_id text) LANGUAGE plpgsql AS $$
      DECLARE
        v_token bigint;
        v_last bigint;
        v_leaf text;
        v_erased bigint;
        v_turn integer := 0;
        v_seqs bigint[] := '{}';
        v_parents text[] := '{}';
        v_seen text[] := '{}';
        v_parent text;
        i integer;
      BEGIN
        IF p_fence_run IS NOT NULL THEN
          SELECT r.fencing_token INTO v_token FROM runs r WHERE r.id = p_fence_run FOR SHARE;
          IF NOT FOUND OR v_token <> p_fence_token THEN
            RAISE EXCEPTION 'fenced' USING ERRCODE = 'KF001', DETAIL = coalesce(v_token::text, '');
          END IF;
        END IF;
        SELECT s.last_seq, s.leaf_id, s.erased_at INTO v_last, v_leaf, v_erased FROM sessions s WHERE s.id = p_session FOR UPDATE;
        IF NOT FOUND THEN RAISE EXCEPTION 'no session' USING ERRCODE = 'KN001'; END IF;
        IF v_erased IS NOT NULL THEN RAISE EXCEPTION 'erased' USING ERRCODE = 'KE001'; END IF;
        IF p_expect IS NOT NULL AND v_last <> p_expect THEN
          RAISE EXCEPTION 'seq conflict' USING ERRCODE = 'KS001', DETAIL = v_last::text;
        END IF;
        FOR i IN 1 .. coalesce(array_length(p_ids, 1), 0) LOOP
          v_last := v_last + 1;
          IF p_turns[i] IS NOT NULL AND p_turns[i] > v_turn THEN v_turn := p_turns[i]; END IF;
          v_parent := NULL;
          IF p_entries[i] THEN
            v_parent := CASE WHEN p_has_parent[i] THEN p_parents[i] ELSE v_leaf END;
            -- The tree never spans sessions: an explicit parent is an entry of this one.
            IF p_has_parent[i] AND p_parents[i] IS NOT NULL AND NOT (p_parents[i] = ANY (v_seen))
               AND NOT EXISTS (SELECT 1 FROM events e WHERE e.session_id = p_session AND e.id = p_parents[i] AND e.entry) THEN
              RAISE EXCEPTION 'invalid parent' USING ERRCODE = 'KP001', DETAIL = p_ids[i] || ' ' || p_parents[i];
            END IF;
            v_seen := v_seen || p_ids[i];
            v_leaf := p_ids[i];
          ELSIF p_has_leaf[i] THEN
            v_leaf := p_leaves[i];
          END IF;
          v_seqs := v_seqs || v_last;
          v_parents := v_parents || v_parent;
        END LOOP;
        IF coalesce(array_length(p_ids, 1), 0) = 0 THEN RETURN; END IF;
        INSERT INTO events (session_id, seq, id, type, v, time, run_id, turn, step, entry, parent_id, ignorable, data)
          SELECT p_session, u.* FROM unnest(v_seqs, p_ids, p_types, p_vs, p_times, p_run_ids, p_turns, p_steps, p_entries, v_parents, p_ignorable, p_data) AS u;
        IF coalesce(array_length(p_hashes, 1), 0) > 0 THEN
          INSERT INTO blob_refs (session_id, hash) SELECT p_session, h FROM unnest(p_hashes) AS h ON CONFLICT DO NOTHING;
        END IF;
        UPDATE sessions s SET last_seq = v_last, leaf_id = v_leaf, last_turn = GREATEST(s.last_turn, v_turn) WHERE s.id = p_session;
        -- Publication on commit: delivered when the transaction commits, never for a rollback.
        PERFORM pg_notify('keel_' || current_schema(), json_build_object('s', p_session, 'q', v_last)::text);
        RETURN QUERY SELECT u.seq, u.parent_id FROM unnest(v_seqs, v_parents) AS u(seq, parent_id);
      END $$;
    `,
  },
  {
    version: 4,
    sql: `
      -- Usage by time (usageTotals): the runs that ended in a range, from the index.
      CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
    `,
  },
  {
    // The waiting model (ADR-0015): sleeping and waiting_for_signal runs, signals and callback tokens.
    version: 5,
    sql: postgresWaitsMigration(),
  },
  {
    // Schedules and their fires (ADR-0016); 5 and 7 are reserved for other features.
    version: 6,
    sql: schedulesDdl('BIGINT'),
  },
  {
    // Webhooks (ADR-0017): subscriptions, the outbox of deliveries, their attempts.
    version: 7,
    sql: WEBHOOKS_MIGRATION_SQL,
  },
  {
    // Provider flow control (docs/flow-control.md): limit slots, windows, pauses and waiters.
    version: 8,
    sql: limitsDdl('BIGINT'),
  },
  {
    // When an idle run is next due (ADR-0034): a generated column and its partial index, so that a
    // sweep reads what is due from the index instead of listing the idle runs. Why Keel paused a
    // schedule by itself (its target session was archived or erased).
    version: 9,
    sql: `${POSTGRES_DUE_RUNS_MIGRATION}
      ALTER TABLE schedules ADD COLUMN paused_reason text;`,
  },
  {
    // Webhooks, issue 38: delivery end times (retention) and sessions (erasure), rotated secrets (see WEBHOOKS_MIGRATION_2_SQL).
    version: 10,
    sql: WEBHOOKS_MIGRATION_2_SQL,
  },
  {
    // Each run's tenant on its row, and the runs waiting for a person indexed by tenant (the inbox
    // filters by tenant in its query: run-tenants.ts). The update rewrites every run row once.
    version: 11,
    sql: RUN_TENANTS_MIGRATION_SQL,
  },
];

export const latestSchemaVersion = migrations.at(-1)!.version;

/** A lock id of Keel's migrations, per schema (pg_advisory_xact_lock takes a bigint). */
const MIGRATION_LOCK = 0x6b65656c; // "keel"

/**
 * Brings the schema up to the latest version; refuses (SchemaVersionError) one written by a newer
 * Keel. Nodes starting together take turns (an advisory lock); each migration commits on its own.
 */
export async function migrate(client: pg.ClientBase, schema: string): Promise<void> {
  const ident = quoteIdent(schema);
  await client.query('BEGIN');
  try {
    await client.query('SELECT pg_advisory_xact_lock($1, hashtext($2))', [MIGRATION_LOCK, schema]);
    await client.query(`CREATE SCHEMA IF NOT EXISTS ${ident}`);
    await client.query(
      `CREATE TABLE IF NOT EXISTS ${ident}.keel_schema (version integer PRIMARY KEY, applied_at bigint NOT NULL)`,
    );
    const { rows } = await client.query<{ v: number | null }>(`SELECT max(version) AS v FROM ${ident}.keel_schema`);
    const current = rows[0]?.v ?? 0;
    if (current > latestSchemaVersion) {
      throw new SchemaVersionError(
        `the database schema ${schema} was written by a newer Keel (schema version ${current}; this Keel knows up to ${latestSchemaVersion}): upgrade Keel to open it`,
      );
    }
    for (const m of migrations) {
      if (m.version <= current) continue;
      await client.query(`SET LOCAL search_path TO ${ident}`);
      await client.query(m.sql);
      await client.query(`INSERT INTO ${ident}.keel_schema (version, applied_at) VALUES ($1, $2)`, [
        m.version,
        Date.now(),
      ]);
    }
    await client.query('COMMIT');
  } catch (e) {
    await client.query('ROLLBACK').catch(() => {});
    throw e;
  }
}

/** An SQL identifier, quoted. */
export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}
