/**
 * Client-side counts of what a process sends to PostgreSQL, for bench/cluster.ts's server cost
 * where the server has no pg_stat_statements: `pg.Client.prototype.query` is wrapped (pg.Pool
 * calls it with a callback, the store's transactions call it for a promise; counting at the call
 * needs neither, every argument is passed on as it came). A call is one round trip (pg sends one
 * query at a time on a connection, no pipelining); a simple-query text of several statements
 * separated by ';' (`BEGIN; SAVEPOINT …`) is one round trip and as many statements. Transactions:
 * each COMMIT, and each query sent outside a transaction block (its own implicit transaction).
 * The backend pid of every connection that sent a query is kept, so that the server's CPU can be
 * told apart by process (server-cost.ts).
 */
import pg from 'pg';

export class QueryTally {
  queries = 0;
  statements = 0;
  transactions = 0;
  rollbacks = 0;
  readonly pids = new Set<number>();

  snapshot(): TallySnapshot {
    return {
      queries: this.queries,
      statements: this.statements,
      transactions: this.transactions,
      rollbacks: this.rollbacks,
      pids: [...this.pids],
    };
  }
}

export interface TallySnapshot {
  queries: number;
  statements: number;
  transactions: number;
  rollbacks: number;
  pids: number[];
}

/** Where the queries sent now are counted (null: nowhere). */
let current: QueryTally | null = null;
/** The backend pid of every connection that sent a query since the wrapper was installed, counted or not. */
const seen = new Set<number>();

/** The backends this process has used (its pool's, its LISTEN connection's…) since countQueriesInto was first called. */
export function seenPids(): number[] {
  return [...seen];
}
let installed = false;
const inBlock = new WeakMap<object, boolean>();
const apart = new WeakSet<object>();

/** A connection whose queries are never counted (the meter's, see server-cost.ts). */
export function neverCount(client: pg.Client): void {
  apart.add(client);
}

/** Counts the queries sent from now on into `tally` (null: stop counting). Installs the wrapper once. */
export function countQueriesInto(tally: QueryTally | null): void {
  current = tally;
  if (installed) return;
  installed = true;
  const original = pg.Client.prototype.query as (...args: unknown[]) => unknown;
  (pg.Client.prototype as unknown as { query: (...args: unknown[]) => unknown }).query = function (
    this: pg.Client & { processID: number | null },
    ...args: unknown[]
  ) {
    if (!apart.has(this)) {
      if (this.processID !== null) seen.add(this.processID);
      if (current) tallyQuery(current, this, args[0], args[1]);
    }
    return original.apply(this, args);
  };
}

function tallyQuery(
  t: QueryTally,
  client: pg.Client & { processID: number | null },
  config: unknown,
  values: unknown,
): void {
  t.queries++;
  if (client.processID !== null) t.pids.add(client.processID);
  const c = config as { text?: unknown; name?: unknown; values?: unknown; submit?: unknown } | string | null;
  const text = typeof c === 'string' ? c : typeof c?.text === 'string' ? c.text : '';
  const extended =
    typeof c === 'object' &&
    c !== null &&
    (c.name !== undefined || Array.isArray(c.values) || typeof c.submit === 'function');
  // The extended protocol takes one statement; a simple query may hold several.
  const statements =
    extended || Array.isArray(values)
      ? [text]
      : text
          .split(';')
          .map((s) => s.trim())
          .filter((s) => s !== '');
  t.statements += Math.max(1, statements.length);
  let block = inBlock.get(client) ?? false;
  let implicit = false;
  for (const s of statements) {
    const head = s.slice(0, 20).toUpperCase();
    if (head.startsWith('BEGIN') || head.startsWith('START TRANSACTION')) block = true;
    else if (head.startsWith('COMMIT') || head.startsWith('END')) {
      if (block) t.transactions++;
      block = false;
    } else if (head.startsWith('ROLLBACK') && !/^ROLLBACK\s+TO/.test(head)) {
      if (block) t.rollbacks++;
      block = false;
    } else if (!block) implicit = true;
  }
  if (implicit) t.transactions++;
  inBlock.set(client, block);
}
