/** PostgreSQL schema version 21: several appends, their blobs and the broadcasts before them, in one call. */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  version: 21,
  sql: `
      -- keel_append's body, with a choice: p_nowait refuses at once (55P03) an append whose run
      -- or session row another transaction holds, instead of waiting for it. keel_append is this
      -- with waiting, as before (a transaction's append).
      CREATE OR REPLACE FUNCTION keel_append_one(
        p_nowait boolean, p_session text, p_fence_run text, p_fence_token bigint, p_expect bigint,
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
        v_n integer := coalesce(array_length(p_ids, 1), 0);
        v_seqs bigint[] := '{}';
        v_parents text[] := '{}';
        v_seen text[] := '{}';
        v_parent text;
        i integer;
      BEGIN
        IF p_fence_run IS NOT NULL THEN
          IF p_nowait THEN
            SELECT r.fencing_token INTO v_token FROM runs r WHERE r.id = p_fence_run FOR SHARE NOWAIT;
          ELSE
            SELECT r.fencing_token INTO v_token FROM runs r WHERE r.id = p_fence_run FOR SHARE;
          END IF;
          IF NOT FOUND OR v_token <> p_fence_token THEN
            RAISE EXCEPTION 'fenced' USING ERRCODE = 'KF001', DETAIL = coalesce(v_token::text, '');
          END IF;
        END IF;
        IF p_nowait THEN
          SELECT s.last_seq, s.leaf_id, s.erased_at INTO v_last, v_leaf, v_erased FROM sessions s WHERE s.id = p_session FOR UPDATE NOWAIT;
        ELSE
          SELECT s.last_seq, s.leaf_id, s.erased_at INTO v_last, v_leaf, v_erased FROM sessions s WHERE s.id = p_session FOR UPDATE;
        END IF;
        IF NOT FOUND THEN RAISE EXCEPTION 'no session' USING ERRCODE = 'KN001'; END IF;
        IF v_erased IS NOT NULL THEN RAISE EXCEPTION 'erased' USING ERRCODE = 'KE001'; END IF;
        IF p_expect IS NOT NULL AND v_last <> p_expect THEN
          RAISE EXCEPTION 'seq conflict' USING ERRCODE = 'KS001', DETAIL = v_last::text;
        END IF;
        IF v_n = 0 THEN RETURN; END IF;
        FOR i IN 1 .. v_n LOOP
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
          v_seqs[i] := v_last;
          v_parents[i] := v_parent;
        END LOOP;
        INSERT INTO events (session_id, seq, id, type, v, time, run_id, turn, step, entry, parent_id, ignorable, data)
          SELECT p_session, u.* FROM unnest(v_seqs, p_ids, p_types, p_vs, p_times, p_run_ids, p_turns, p_steps, p_entries, v_parents, p_ignorable, p_data) AS u;
        IF coalesce(array_length(p_hashes, 1), 0) > 0 THEN
          INSERT INTO blob_refs (session_id, hash) SELECT p_session, h FROM unnest(p_hashes) AS h ON CONFLICT DO NOTHING;
        END IF;
        UPDATE sessions s SET last_seq = v_last, leaf_id = v_leaf, last_turn = GREATEST(s.last_turn, v_turn) WHERE s.id = p_session;
        -- Publication on commit: delivered when the transaction commits, never for a rollback.
        PERFORM pg_notify('keel_' || current_schema(), '{"s":' || to_json(p_session)::text || ',"q":' || v_last || '}');
        RETURN QUERY SELECT u.seq, u.parent_id FROM unnest(v_seqs, v_parents) AS u(seq, parent_id);
      END $$;

      CREATE OR REPLACE FUNCTION keel_append(
        p_session text, p_fence_run text, p_fence_token bigint, p_expect bigint,
        p_ids text[], p_types text[], p_vs integer[], p_times bigint[], p_run_ids text[], p_turns integer[], p_steps integer[],
        p_entries boolean[], p_parents text[], p_has_parent boolean[], p_leaves text[], p_has_leaf boolean[], p_ignorable boolean[],
        p_data text[], p_hashes text[]
      ) RETURNS TABLE (seq bigint, parent_id text) LANGUAGE sql AS $$
        SELECT * FROM keel_append_one(false, p_session, p_fence_run, p_fence_token, p_expect, p_ids, p_types, p_vs, p_times,
          p_run_ids, p_turns, p_steps, p_entries, p_parents, p_has_parent, p_leaves, p_has_leaf, p_ignorable, p_data, p_hashes)
      $$;

      -- The commit queue's statement (commit-queue.ts, ADR-0047): one call, one transaction and
      -- one round trip for every append waiting in a process. The broadcasts queued before them
      -- are notified first (delivered at commit, before the appends' own notices); the blobs the
      -- appends refer to are put; then the appends. Several appends each go in a subtransaction of
      -- their own, so that one refused (a fence, a seq conflict, its rows held: p_nowait) leaves
      -- the others standing and tells its SQLSTATE instead of rows; an append alone in its call
      -- needs none (its refusal fails the call, which carried nothing else of consequence).
      CREATE OR REPLACE FUNCTION keel_append_many(
        p_nowait boolean, p_notify text[],
        p_blob_hashes text[], p_blob_data text[], p_blob_media text[], p_blob_encodings text[], p_blob_heads text[],
        p_sessions text[], p_fence_runs text[], p_fence_tokens bigint[], p_expects bigint[], p_counts integer[], p_hash_counts integer[],
        p_ids text[], p_types text[], p_vs integer[], p_times bigint[], p_run_ids text[], p_turns integer[], p_steps integer[],
        p_entries boolean[], p_parents text[], p_has_parent boolean[], p_leaves text[], p_has_leaf boolean[], p_ignorable boolean[],
        p_data text[], p_hashes text[]
      ) RETURNS TABLE (o_item integer, o_seq bigint, o_parent text, o_state text, o_detail text, o_constraint text, o_message text)
      LANGUAGE plpgsql AS $$
      DECLARE
        v_items integer := coalesce(array_length(p_sessions, 1), 0);
        v_from integer := 1;
        v_hash_from integer := 1;
        v_to integer;
        v_hash_to integer;
        v_now bigint := (extract(epoch FROM clock_timestamp()) * 1000)::bigint;
        i integer;
        n text;
      BEGIN
        FOREACH n IN ARRAY coalesce(p_notify, '{}') LOOP
          PERFORM pg_notify('keel_' || current_schema(), n);
        END LOOP;
        IF coalesce(array_length(p_blob_hashes, 1), 0) > 0 THEN
          INSERT INTO blobs (hash, data, size, created_at, media_type, encoding)
            SELECT h, d, octet_length(d), v_now, m, e FROM unnest(p_blob_hashes, p_blob_data, p_blob_media, p_blob_encodings) AS b(h, d, m, e)
            ON CONFLICT (hash) DO NOTHING;
          INSERT INTO blob_heads (hash, head)
            SELECT h, x FROM unnest(p_blob_hashes, p_blob_heads) AS b(h, x) WHERE x IS NOT NULL
            ON CONFLICT (hash) DO NOTHING;
        END IF;
        IF v_items = 1 THEN
          RETURN QUERY SELECT 1, a.seq, a.parent_id, NULL::text, NULL::text, NULL::text, NULL::text
            FROM keel_append_one(p_nowait, p_sessions[1], p_fence_runs[1], p_fence_tokens[1], p_expects[1],
                                 coalesce(p_ids, '{}'), p_types, p_vs, p_times, p_run_ids, p_turns, p_steps, p_entries,
                                 p_parents, p_has_parent, p_leaves, p_has_leaf, p_ignorable, p_data, coalesce(p_hashes, '{}')) a;
          RETURN;
        END IF;
        FOR i IN 1 .. v_items LOOP
          v_to := v_from + p_counts[i] - 1;
          v_hash_to := v_hash_from + p_hash_counts[i] - 1;
          BEGIN
            RETURN QUERY SELECT i, a.seq, a.parent_id, NULL::text, NULL::text, NULL::text, NULL::text
              FROM keel_append_one(p_nowait, p_sessions[i], p_fence_runs[i], p_fence_tokens[i], p_expects[i],
                               coalesce(p_ids[v_from:v_to], '{}'), p_types[v_from:v_to], p_vs[v_from:v_to], p_times[v_from:v_to],
                               p_run_ids[v_from:v_to], p_turns[v_from:v_to], p_steps[v_from:v_to], p_entries[v_from:v_to],
                               p_parents[v_from:v_to], p_has_parent[v_from:v_to], p_leaves[v_from:v_to], p_has_leaf[v_from:v_to],
                               p_ignorable[v_from:v_to], p_data[v_from:v_to], coalesce(p_hashes[v_hash_from:v_hash_to], '{}')) a;
          EXCEPTION WHEN OTHERS THEN
            DECLARE
              v_state text; v_detail text; v_constraint text; v_message text;
            BEGIN
              GET STACKED DIAGNOSTICS v_state = RETURNED_SQLSTATE, v_detail = PG_EXCEPTION_DETAIL,
                                      v_constraint = CONSTRAINT_NAME, v_message = MESSAGE_TEXT;
              RETURN QUERY SELECT i, NULL::bigint, NULL::text, v_state, v_detail, v_constraint, v_message;
            END;
          END;
          v_from := v_to + 1;
          v_hash_from := v_hash_to + 1;
        END LOOP;
      END $$;

      -- Room on each page for a row's next version: the head a session's every append moves, and
      -- a run's lease, are updated in place (HOT), without touching their indexes.
      ALTER TABLE sessions SET (fillfactor = 80);
      ALTER TABLE runs SET (fillfactor = 80);
    `,
};
