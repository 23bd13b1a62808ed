/** PostgreSQL schema version 21: several appends, their blobs and the broadcasts before them, in one call. */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
  version: 21,
  sql: `
      -- The commit queue's statement (commit-queue.ts, ADR-0047): one call, one transaction and
      -- one round trip for every append waiting in a process. The broadcasts queued before them
      -- are notified first (delivered at commit, before the appends' own notices); the blobs the
      -- appends refer to are put; then each append is keel_append in a subtransaction of its own,
      -- so that one refused (a fence, a seq conflict, a lost lock race) leaves the others standing
      -- and tells its SQLSTATE instead of rows. With p_nowait, an append whose session or run row
      -- another transaction holds is not waited for (55P03 at once, the caller makes it alone):
      -- one long transaction on a session must not hold up every other run's commit.
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
        FOR i IN 1 .. coalesce(array_length(p_sessions, 1), 0) LOOP
          v_to := v_from + p_counts[i] - 1;
          v_hash_to := v_hash_from + p_hash_counts[i] - 1;
          BEGIN
            IF p_nowait THEN
              IF p_fence_runs[i] IS NOT NULL THEN
                PERFORM 1 FROM runs r WHERE r.id = p_fence_runs[i] FOR SHARE NOWAIT;
              END IF;
              PERFORM 1 FROM sessions s WHERE s.id = p_sessions[i] FOR UPDATE NOWAIT;
            END IF;
            RETURN QUERY SELECT i, a.seq, a.parent_id, NULL::text, NULL::text, NULL::text, NULL::text
              FROM keel_append(p_sessions[i], p_fence_runs[i], p_fence_tokens[i], p_expects[i],
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
    `,
};
