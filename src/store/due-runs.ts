/**
 * When a run no worker holds is next due (ADR-0034): the first of its wait's deadline (a sleep's
 * wake-up included) and its own deadline. Both backends keep it as a generated column, `due_at`,
 * computed by the database from the row (the runs layer never writes it, so no path can forget
 * to), with a partial index on (due_at, id): a sweep reads what is due from the index
 * (`StoreOps.dueRuns`), a bounded page at a time, and its cost follows what is due, not how many
 * runs wait.
 */

/**
 * Statuses in which no worker holds a run: its deadline is the sweep's to enforce. As migration 18
 * (SQLite) and 9 (PostgreSQL) made `due_at`; the quota migration added `waiting_for_quota` to both
 * lists (store/quota-rows.ts).
 */
const IDLE = `'queued','paused','waiting_approval','waiting_for_user','sleeping','waiting_for_signal'`;
/** Statuses in which a run waits (its `waiting.expiresAt` is a deadline). */
const WAITING = `'waiting_approval','waiting_for_user','sleeping','waiting_for_signal'`;

/** SQLite migration 18: `due_at` (a virtual generated column) and its partial index. */
export const SQLITE_DUE_RUNS_MIGRATION = `
  ALTER TABLE runs ADD COLUMN due_at INTEGER GENERATED ALWAYS AS (
    CASE WHEN status IN (${IDLE}) THEN
      coalesce(
        min(CASE WHEN status IN (${WAITING}) THEN json_extract(waiting, '$.expiresAt') END, deadline_at),
        CASE WHEN status IN (${WAITING}) THEN json_extract(waiting, '$.expiresAt') END,
        deadline_at
      )
    END
  ) VIRTUAL;
  CREATE INDEX runs_due ON runs (due_at, id) WHERE due_at IS NOT NULL;
`;

/**
 * PostgreSQL migration 9: `due_at` (a stored generated column) and its partial index. PostgreSQL
 * cannot read a field of JSON text that holds a `\u0000` escape anywhere (json and jsonb both
 * refuse it), and a waiting call's arguments may hold one (docs/api.md, NUL): the wait's first
 * deadline is kept in a column of its own, `wait_expires_at`, which the store writes with every
 * `waiting` it writes (see `waitExpiresAt`); older rows get it from the end of their JSON, where
 * `expiresAt` is.
 */
export const POSTGRES_DUE_RUNS_MIGRATION = `
  ALTER TABLE runs ADD COLUMN wait_expires_at bigint;
  UPDATE runs SET wait_expires_at = (regexp_match(waiting, '"expiresAt":(-?[0-9]+)}$'))[1]::bigint WHERE waiting IS NOT NULL;
  ALTER TABLE runs ADD COLUMN due_at bigint GENERATED ALWAYS AS (
    CASE WHEN status IN (${IDLE}) THEN
      LEAST(deadline_at, CASE WHEN status IN (${WAITING}) THEN wait_expires_at END)
    END
  ) STORED;
  CREATE INDEX runs_due ON runs (due_at, id) WHERE due_at IS NOT NULL;
`;

/** The first deadline of a wait as the PostgreSQL store writes it beside the wait (`wait_expires_at`). */
export const waitExpiresAt = (waiting: unknown): number | null => {
  const at = (waiting as { expiresAt?: unknown } | null)?.expiresAt;
  return typeof at === 'number' && Number.isFinite(at) ? Math.floor(at) : null;
};

/** The query of a page (both dialects: `?` placeholders become `$n` in PostgreSQL's). */
export const dueRunsSql = (after: boolean, param: (n: number) => string): string =>
  `SELECT * FROM runs WHERE due_at IS NOT NULL AND due_at <= ${param(1)}${after ? ` AND (due_at, id) > (${param(2)}, ${param(3)})` : ''} ORDER BY due_at, id LIMIT ${param(after ? 4 : 2)}`;
