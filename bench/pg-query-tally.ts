/**
 * Client-side counts of what a process sends to PostgreSQL, for bench/cluster.ts's server cost
 * where the server has no pg_stat_statements: `pg.Client.prototype.query` is wrapped (pg.Pool
 * calls it with a callback, the store's transactions call it for a promise; counting at the call
 * needs neither, every argument is passed on as it came, and its answer is watched). A call is a
 * query; it is a round trip of its own unless the connection had another one unanswered when it
 * was sent (the store's connections pipeline: a transaction's BEGIN and savepoints travel with the
 * statement after them). A simple-query text of several statements separated by ';' is one query
 * and as many statements. Transactions:
 * each COMMIT, and each query sent outside a transaction block (its own implicit transaction).
 * The backend pid of every connection that sent a query is kept, so that the server's CPU can be
 * told apart by process (server-cost.ts).
 */
import pg from 'pg';

export class QueryTally {
  queries = 0;
  /** Queries sent while their connection had none unanswered: each waits for an answer of its own. */
  roundTrips = 0;
  /** Calls of the commit queue's statement (keel_append_many): the durable points made outside transactions. */
  appendCalls = 0;
  statements = 0;
  transactions = 0;
  rollbacks = 0;
  readonly pids = new Set<number>();

  snapshot(): TallySnapshot {
    return {
      queries: this.queries,
      roundTrips: this.roundTrips,
      appendCalls: this.appendCalls,
      statements: this.statements,
      transactions: this.transactions,
      rollbacks: this.rollbacks,
      pids: [...this.pids],
    };
  }
}

export interface TallySnapshot {
  queries: number;
  roundTrips: number;
  appendCalls: number;
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
/** Queries sent on each connection and not answered yet. */
const unanswered = new WeakMap<object, number>();
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
    if (apart.has(this)) return original.apply(this, args);
    if (this.processID !== null) seen.add(this.processID);
    const pending = unanswered.get(this) ?? 0;
    if (current) {
      tallyQuery(current, this, args[0], args[1]);
      if (pending === 0) current.roundTrips++;
    }
    unanswered.set(this, pending + 1);
    const answered = () => unanswered.set(this, Math.max(0, (unanswered.get(this) ?? 1) - 1));
    // The answer: a callback (pg.Pool's), a query config's callback, or the promise returned.
    const i = args.findIndex((a) => typeof a === 'function');
    if (i >= 0) {
      const cb = args[i] as (...a: unknown[]) => unknown;
      args[i] = (...a: unknown[]) => {
        answered();
        return cb(...a);
      };
      return original.apply(this, args);
    }
    const result = original.apply(this, args) as Promise<unknown> | undefined;
    if (result && typeof result.then === 'function') result.then(answered, answered);
    else answered();
    return result;
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
  if (text.includes('keel_append_many(')) t.appendCalls++;
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
