/**
 * Reads outside transactions, written together (ADR-0049). The reads the store's callers make in
 * one turn of the event loop (the runs a worker starts side by side each read their session, their
 * context, their steering) go to one pooled connection (16 at most on each) and in one write: the connection pipelines
 * (each statement still its own transaction, with its own answer), so a read costs its share of a
 * write and of a connection's checkout instead of one each. Only reads: a plain SELECT never waits
 * for a lock, so no statement of a batch can hold the others behind a transaction's lock.
 */
import type pg from 'pg';
import { watchCheckedOut } from './connection-errors.ts';
import { socketOf } from './sql.ts';

/**
 * Statements a connection takes in one batch: the server runs a connection's statements one after
 * another, so many reads at once (an API server's streams catching up) are spread over several
 * connections, this many on each, and still run side by side on the server's cores.
 */
const MAX_BATCH = 16;

interface Waiting {
  query: pg.QueryConfig;
  resolve(result: pg.QueryResult): void;
  reject(e: unknown): void;
}

export class ReadBatch {
  private readonly pool: pg.Pool;
  private waiting: Waiting[] = [];
  private scheduled = false;

  constructor(pool: pg.Pool) {
    this.pool = pool;
  }

  /** node-postgres's `query` for a query config: answered once the batch it is written with is. */
  query<R extends pg.QueryResultRow>(query: pg.QueryConfig | string): Promise<pg.QueryResult<R>> {
    return new Promise<pg.QueryResult<R>>((resolve, reject) => {
      this.waiting.push({
        query: typeof query === 'string' ? { text: query } : query,
        resolve: resolve as (r: pg.QueryResult) => void,
        reject,
      });
      if (this.scheduled) return;
      this.scheduled = true;
      // Once the callbacks of this turn of the event loop have run (their reads are in by then).
      setImmediate(() => this.flush());
    });
  }

  private flush(): void {
    this.scheduled = false;
    const waiting = this.waiting;
    this.waiting = [];
    for (let i = 0; i < waiting.length; i += MAX_BATCH) void this.send(waiting.slice(i, i + MAX_BATCH));
  }

  /** One batch on one pooled connection, in one write. */
  private async send(batch: Waiting[]): Promise<void> {
    let client: pg.PoolClient;
    try {
      client = await this.pool.connect();
    } catch (e) {
      for (const w of batch) w.reject(e);
      return;
    }
    const watch = watchCheckedOut(client);
    try {
      const stream = socketOf(client);
      stream?.cork();
      const answers = batch.map((w) => {
        try {
          return client.query(w.query).then(w.resolve, w.reject);
        } catch (e) {
          w.reject(e); // (refused before it was sent)
          return undefined;
        }
      });
      stream?.uncork();
      await Promise.all(answers);
    } finally {
      watch.done();
      client.release(watch.lost());
    }
  }
}
