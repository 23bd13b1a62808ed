/**
 * The PostgreSQL store's settings of a command, from its environment (the database itself is
 * `--db` or $KEEL_DB): the schema, the pool, a transaction pooler in front (PgBouncer) with the
 * direct URL LISTEN takes, the statement, lock and idle-in-transaction timeouts, and the slow
 * statement threshold (docs/deployment.md, ADR-0046).
 */
import type { PostgresStoreOptions } from '../store/postgres/index.ts';
import { UsageError } from './args.ts';

/** The variables and the option each sets: whole numbers >= 0 (the pool's size >= 1). */
const NUMBERS = {
  KEEL_DB_POOL_SIZE: 'poolSize',
  KEEL_DB_STATEMENT_TIMEOUT_MS: 'statementTimeoutMs',
  KEEL_DB_LOCK_TIMEOUT_MS: 'lockTimeoutMs',
  KEEL_DB_IDLE_IN_TRANSACTION_TIMEOUT_MS: 'idleInTransactionTimeoutMs',
  KEEL_DB_SLOW_QUERY_MS: 'slowQueryMs',
} as const satisfies Record<string, keyof PostgresStoreOptions>;

export function postgresOptionsFromEnv(env: NodeJS.ProcessEnv): Omit<PostgresStoreOptions, 'url'> {
  const o: Omit<PostgresStoreOptions, 'url'> = {};
  if (env.KEEL_DB_SCHEMA) o.schema = env.KEEL_DB_SCHEMA;
  for (const [name, option] of Object.entries(NUMBERS) as Array<
    [keyof typeof NUMBERS, (typeof NUMBERS)[keyof typeof NUMBERS]]
  >) {
    const raw = env[name];
    if (raw === undefined || raw === '') continue;
    const min = option === 'poolSize' ? 1 : 0;
    if (!/^\d+$/.test(raw.trim()) || Number(raw) < min)
      throw new UsageError(`$${name} must be a whole number >= ${min}, not ${JSON.stringify(raw)}`);
    o[option] = Number(raw);
  }
  const pooler = env.KEEL_DB_POOLER;
  if (pooler !== undefined && pooler !== '') {
    if (pooler !== 'none' && pooler !== 'transaction')
      throw new UsageError(`$KEEL_DB_POOLER must be none or transaction, not ${JSON.stringify(pooler)}`);
    o.pooler = pooler;
  }
  if (env.KEEL_DB_LISTEN_URL) o.listenUrl = env.KEEL_DB_LISTEN_URL;
  if (o.pooler === 'transaction' && !o.listenUrl)
    throw new UsageError(
      '$KEEL_DB_POOLER=transaction needs $KEEL_DB_LISTEN_URL: a postgres:// URL straight to the server, for LISTEN (it does not pass a transaction pooler)',
    );
  return o;
}
