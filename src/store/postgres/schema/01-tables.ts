/**
 * PostgreSQL schema version 1: the tables.
 *
 * The PostgreSQL log stores one row per event (ADR-0011): the server compresses large values itself
 * (TOAST), and a row per event lets concurrent readers and writers lock and index exactly what they
 * touch. The events are the same records as SQLite's (the port's StoredEvent), with `data` as the
 * JSON text the log wrote.
 */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
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
};
