/** PostgreSQL schema version 3: lighter append. */
import type { PostgresMigration } from './migration.ts';

export const migration: PostgresMigration = {
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
};
