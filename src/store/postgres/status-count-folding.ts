/**
 * The runs' counts by status on PostgreSQL (migration 22, ADR-0050): a status change inserts delta
 * rows, which lock nothing; every process that uses the store folds them into the counter rows
 * now and then, so that the deltas stay few and `runs.countByStatus` reads a few rows.
 */
import type pg from 'pg';

/** How often each process folds the deltas. */
export const FOLD_STATUS_COUNTS_MS = 1000;

/**
 * Folds the deltas every `everyMs` once `ready` resolved, one fold at a time, until the returned
 * function is called (it resolves once a fold in flight has ended). A fold that fails (the
 * database is away) is tried again at the next tick: the counts stay right meanwhile, only their
 * read takes more rows.
 */
export function foldStatusCounts(
  pool: pg.Pool,
  ready: Promise<void>,
  everyMs = FOLD_STATUS_COUNTS_MS,
): () => Promise<void> {
  let folding: Promise<void> | undefined;
  let stopped = false;
  const timer = setInterval(() => {
    if (folding || stopped) return;
    folding = ready
      .then(() => pool.query('SELECT keel_fold_run_status_counts()'))
      .then(
        () => {},
        () => {},
      )
      .finally(() => (folding = undefined));
  }, everyMs);
  timer.unref();
  return async () => {
    stopped = true;
    clearInterval(timer);
    await folding;
  };
}
