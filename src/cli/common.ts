import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { openPostgresStore } from '../store/postgres/index.ts';
import type { Store } from '../store/index.ts';
import { openSqliteStore } from '../store/sqlite/index.ts';
import { createLogger, parseLogLevel, type Logger } from '../monitoring/index.ts';
import { UsageError, type Io } from './args.ts';
import { postgresOptionsFromEnv } from './postgres-options.ts';

/** The database a command works on: --db, else $KEEL_DB, else ./.keel/keel.db. */
export function dbPath(io: Io, db: string | undefined): string {
  return db ?? (io.env.KEEL_DB || resolve('.keel', 'keel.db'));
}

/** A PostgreSQL connection string (postgres:// or postgresql://) rather than a SQLite file. */
export const isPostgresUrl = (location: string): boolean => /^postgres(ql)?:\/\//i.test(location);

/** A connection string without its password, to print. */
export function redactUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url.replace(/:[^:@/]*@/, ':***@');
  }
}

/** An opened store and where it is, for people (a file path, or a redacted PostgreSQL URL). */
export type OpenedDb = { store: Store; where: string };

/**
 * Opens the database: PostgreSQL when the location is a postgres:// URL (the schema from
 * $KEEL_DB_SCHEMA, default keel, and its other settings from $KEEL_DB_…: postgres-options.ts),
 * else a SQLite file. Commands that only read refuse a path with no database rather than silently
 * creating an empty one. A long-running command passes its logger (slow statements go there).
 */
export async function openDb(
  io: Io,
  db: string | undefined,
  o: { create?: boolean; logger?: Logger } = {},
): Promise<OpenedDb> {
  const location = dbPath(io, db);
  if (isPostgresUrl(location)) {
    const store = await openPostgresStore({
      url: location,
      ...postgresOptionsFromEnv(io.env),
      ...(o.logger ? { logger: o.logger } : {}),
    });
    return { store, where: `${redactUrl(location)} (schema ${store.schema})` };
  }
  if (!o.create && location !== ':memory:' && !existsSync(location)) {
    throw new Error(`no database at ${location}: pass --db PATH or set $KEEL_DB (keel serve creates ./.keel/keel.db)`);
  }
  return { store: openSqliteStore({ path: location }), where: location };
}

/** A whole number option within bounds (a usage error otherwise). */
export function intOption(
  command: string,
  name: string,
  value: string | undefined,
  o: { min?: number; default: number },
): number {
  if (value === undefined) return o.default;
  const n = Number(value);
  if (!Number.isInteger(n) || n < (o.min ?? 0))
    throw new UsageError(`${command}: --${name} must be a whole number >= ${o.min ?? 0}, not ${JSON.stringify(value)}`);
  return n;
}

/** One positional argument, or a usage error that says what is missing. */
export function positional(command: string, positionals: string[], what: string, max = 1): string {
  const v = positionals[0];
  if (v === undefined || v === '') throw new UsageError(`${command}: give the ${what}`);
  if (positionals.length > max)
    throw new UsageError(`${command}: unexpected argument ${JSON.stringify(positionals[max])}`);
  return v;
}

export function noPositionals(command: string, positionals: string[]): void {
  if (positionals.length > 0) throw new UsageError(`${command}: unexpected argument ${JSON.stringify(positionals[0])}`);
}

/** `2025-01-02 10:11:12` (UTC), or `-`. */
export const time = (ms: number | null | undefined): string =>
  ms === null || ms === undefined ? '-' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19);

/** A duration for people: 850ms, 12.3s, 4m05s, 2h03m. */
export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)}ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)}s`;
  const s = Math.round(ms / 1000);
  if (s < 3600) return `${Math.floor(s / 60)}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(s / 3600)}h${String(Math.floor((s % 3600) / 60)).padStart(2, '0')}m`;
}

/** One line, at most `max` characters (an ellipsis marks the cut). */
export function clip(s: string, max: number): string {
  const flat = s.replace(/\s+/g, ' ').trim();
  return flat.length <= max ? flat : `${flat.slice(0, Math.max(0, max - 1))}…`;
}

/** Left-aligned columns separated by two spaces; the last column is not padded. */
export function table(headers: readonly string[], rows: ReadonlyArray<readonly string[]>): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)));
  const fmt = (r: readonly string[]) =>
    r
      .map((c, i) => (i === r.length - 1 ? c : c.padEnd(widths[i]!)))
      .join('  ')
      .trimEnd();
  return [fmt(headers), ...rows.map(fmt)].join('\n');
}

/**
 * Progress for long work, on stderr and only when it is a terminal (scripts get clean output):
 * one line rewritten in place, cleared at the end.
 */
export function progress(io: Io): { update(text: string): void; done(): void } {
  if (!io.err.isTTY) return { update: () => {}, done: () => {} };
  let shown = false;
  let last = 0;
  return {
    update(text) {
      const now = Date.now();
      if (shown && now - last < 100) return;
      last = now;
      shown = true;
      io.err.write(`\r\x1b[2K${text}`);
    },
    done() {
      if (shown) io.err.write('\r\x1b[2K');
      shown = false;
    },
  };
}

/** JSON Lines: one compact value a line (for streams of records, whatever the terminal). */
export const jsonl = (io: Io, v: unknown) => io.out.write(`${JSON.stringify(v)}\n`);

/**
 * The structured logger of a long-running command: on stderr (stdout stays for what the command
 * prints), JSON lines, or readable lines when stderr is a terminal; level from --log-level, else
 * $KEEL_LOG_LEVEL, else info.
 */
export function commandLogger(io: Io, level: string | undefined): Logger {
  const chosen =
    level !== undefined
      ? parseLogLevel(level, '--log-level')
      : io.env.KEEL_LOG_LEVEL
        ? parseLogLevel(io.env.KEEL_LOG_LEVEL, '$KEEL_LOG_LEVEL')
        : 'info';
  return createLogger({ level: chosen, destination: io.err });
}
