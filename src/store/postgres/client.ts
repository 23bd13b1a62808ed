/**
 * The connection class of the PostgreSQL store's pool (node-postgres's `Client`, extended): every
 * statement of the store goes through its `query`, which is where what must hold for all of them is
 * done once (ADR-0046):
 *
 * - behind a transaction pooler, statements are unnamed (PgBouncer before 1.21 cannot follow named
 *   prepared statements from one server connection to another), and a transaction's BEGIN carries
 *   its SET LOCAL timeouts in the same round trip (no session state is left on the server
 *   connection the pooler hands to the next client);
 * - a statement slower than `slowQueryMs` is logged with its name and its text;
 * - a statement cancelled by a timeout fails with the StoreError that says so (timeouts.ts).
 */
import pg from 'pg';
import { timeoutFailure } from './timeouts.ts';

/** Where the store logs (the process's pino logger fits). */
export interface StoreLogger {
  warn(fields: Record<string, unknown>, msg: string): void;
}

export interface ClientSettings {
  /** Behind a transaction pooler: unnamed statements. */
  pooled: boolean;
  /** What a transaction's BEGIN is sent as (BEGIN and its SET LOCALs), when not just BEGIN. */
  begin?: string;
  /** A statement slower than this is logged (0: none). */
  slowQueryMs: number;
  logger?: StoreLogger;
}

/** What a slow statement is logged with: its text on one line, cut here. */
const LOGGED_TEXT = 200;

type Callback = (err: Error | null, res?: unknown) => void;

/** A Client class for pg.Pool's `Client` option, applying `s` to every statement. */
export function clientClass(s: ClientSettings): typeof pg.Client {
  return class KeelClient extends pg.Client {
    // node-postgres's overloads, taken as they come: a text, or a query config; values; a callback (pg.Pool's query passes one).
    // eslint-disable-next-line @typescript-eslint/no-explicit-any
    override query(config: any, values?: any, callback?: any): any {
      // A Submittable (a cursor, a stream) is passed on as it is.
      if (typeof config !== 'string' && typeof config?.submit === 'function')
        return super.query(config, values, callback);
      if (typeof values === 'function') {
        callback = values;
        values = undefined;
      }
      const named = typeof config === 'string' ? undefined : (config.name as string | undefined);
      let text = (typeof config === 'string' ? config : config.text) as string;
      // Keel's transactions all start with the statement BEGIN (sql.ts TransactionSql, migrations.ts).
      if (s.begin !== undefined && (text === 'BEGIN' || text.startsWith('BEGIN;'))) text = s.begin + text.slice(5);
      let q: unknown = text;
      if (typeof config !== 'string') {
        const { name, ...rest } = config as { name?: string };
        q = s.pooled || text !== config.text ? { ...rest, text, ...(s.pooled || !name ? {} : { name }) } : config;
      }
      const t0 = s.slowQueryMs > 0 ? performance.now() : 0;
      const after = () => {
        if (t0 === 0) return;
        const ms = performance.now() - t0;
        if (ms >= s.slowQueryMs)
          s.logger?.warn(
            {
              statement: named ?? 'unnamed',
              duration_ms: Math.round(ms),
              sql: text.replace(/\s+/g, ' ').trim().slice(0, LOGGED_TEXT),
            },
            `slow PostgreSQL statement ${named ?? 'unnamed'}: ${Math.round(ms)} ms`,
          );
      };
      if (typeof callback === 'function') {
        return super.query(q as string, values, ((err: Error | null, res?: unknown) => {
          after();
          (callback as Callback)(err ? (timeoutFailure(err, named) as Error) : err, res);
        }) as never);
      }
      return (super.query(q as string, values) as Promise<unknown>).then(
        (res) => {
          after();
          return res;
        },
        (e: unknown) => {
          after();
          throw timeoutFailure(e, named);
        },
      );
    }
  };
}
