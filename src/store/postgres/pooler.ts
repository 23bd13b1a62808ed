/**
 * The PostgreSQL store behind a transaction pooler (PgBouncer with pool_mode=transaction,
 * ADR-0046): each transaction (each statement outside one) may run on another server connection,
 * shared with other clients. So the store keeps no state on a session: statements are unnamed
 * (client.ts), timeouts are SET LOCAL in each transaction (timeouts.ts), migrations take a
 * transaction-scoped lock (migrations.ts), LISTEN goes straight to the server (`listenUrl`), and
 * the schema is the server connections' own default, set where the pooler's connections are made
 * (the role's `ALTER ROLE … SET search_path`, or PgBouncer's `connect_query`) and checked here when
 * the store opens: a startup parameter (`options=-c search_path=…`) does not pass the pooler.
 */
import type pg from 'pg';
import { StoreError } from '../port/index.ts';
import type { StoreLogger } from './client.ts';

/** `none`: a direct connection (or a pooler in session mode); `transaction`: a pooler in transaction mode. */
export type PoolerMode = 'none' | 'transaction';

export const POOLER_MODES: readonly PoolerMode[] = ['none', 'transaction'];

/** The pooler mode of the options, checked with what it needs (a direct URL for LISTEN). */
export function poolerMode(o: { pooler?: string; listenUrl?: string }): PoolerMode {
  const mode = o.pooler ?? 'none';
  if (!(POOLER_MODES as readonly string[]).includes(mode))
    throw new StoreError('invalid_option', `pooler must be ${POOLER_MODES.join(' or ')}, not ${JSON.stringify(mode)}`);
  if (mode === 'transaction' && !o.listenUrl)
    throw new StoreError(
      'invalid_option',
      'pooler "transaction" needs listenUrl: a connection string straight to the PostgreSQL server (LISTEN does not pass a transaction pooler)',
    );
  return mode as PoolerMode;
}

/** The first schema of a search_path setting as the server resolves it (`"$user"` is the role's name). */
export function firstSchema(searchPath: string, role: string): string | undefined {
  const first = searchPath.split(',')[0]?.trim();
  if (!first) return undefined;
  const name = first.startsWith('"') ? first.slice(1, -1).replace(/""/g, '"') : first.toLowerCase();
  return name === '$user' ? role : name;
}

/**
 * Through the pooler, before migrating: the server connections' search_path must lead to the
 * schema (refused otherwise, saying how to set it); single statements outside a transaction run
 * with the server's timeouts, so unbounded ones are logged.
 */
export async function checkThroughPooler(
  client: pg.ClientBase,
  schema: string,
  logger: StoreLogger | undefined,
): Promise<void> {
  const { rows } = await client.query<{ search_path: string; role: string; st: string; lt: string }>(
    `SELECT current_setting('search_path') AS search_path, current_user AS role,
            current_setting('statement_timeout') AS st, current_setting('lock_timeout') AS lt`,
  );
  const r = rows[0]!;
  if (firstSchema(r.search_path, r.role) !== schema)
    throw new StoreError(
      'invalid_search_path',
      `behind a transaction pooler the schema cannot be set per connection: the server's search_path for role ` +
        `${r.role} is ${JSON.stringify(r.search_path)}, not schema ${schema} first. Set it where the pooler's ` +
        `connections are made: ALTER ROLE ${r.role} SET search_path = ${schema} (or PgBouncer's connect_query = ` +
        `'SET search_path TO ${schema}'), see docs/deployment.md`,
    );
  const unbounded = [r.st === '0' ? 'statement_timeout' : '', r.lt === '0' ? 'lock_timeout' : ''].filter(Boolean);
  if (unbounded.length > 0)
    logger?.warn(
      { role: r.role, unbounded },
      `behind a transaction pooler, single statements outside a transaction run with the server's ${unbounded.join(' and ')} of role ${r.role}, which is unbounded: set it with ALTER ROLE ${r.role} SET … (see docs/deployment.md)`,
    );
}
