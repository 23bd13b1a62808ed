/**
 * What the PostgreSQL server spends, for bench/cluster.ts, sampled before and after a measured
 * phase through a connection of its own (the meter):
 *
 * - WAL bytes: `pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')`, the server's WAL position. It is the
 *   whole server's: another client writing meanwhile adds to it. So also, where the server has
 *   pg_walinspect (a contrib module of PostgreSQL 15+; created in the measured schema, gone with
 *   it), the WAL records between the two positions that touch a relation of the measured schema
 *   (its tables, indexes, sequences, TOAST) and the commit records of their transactions: the WAL
 *   of the measured work alone, record lengths without the pages' headers and alignment.
 * - CPU: every process of this machine whose comm is `postgres`, its on-CPU time from
 *   /proc/<pid>/schedstat (ns; utime + stime from /proc/<pid>/stat, in clock ticks, where there
 *   is no schedstat). A process is the backend of a connection the measured processes used (their
 *   pids, see pg-query-tally.ts), a background process of the server (checkpointer, WAL writer…:
 *   they work for every client), or another backend. Null when the server's processes are not
 *   visible here (a server on another machine or in another pid namespace): the meter's own backend
 *   pid is looked for.
 * - pg_stat_statements, when the server loads it (shared_preload_libraries): its calls and WAL
 *   bytes, over every statement of the server.
 * - pg_stat_database's xact_commit of the database (backends report it within about a second, and
 *   at their exit).
 */
import { readdirSync, readFileSync } from 'node:fs';
import pg from 'pg';
import { neverCount } from './pg-query-tally.ts';

const CLOCK_TICK_NS = 1e9 / 100; // USER_HZ: 100 on Linux
const BACKGROUND =
  /^postgres: (.*: )?(checkpointer|background writer|walwriter|autovacuum|logical replication|stats collector|archiver|walsender|walreceiver|startup|io worker|walsummarizer)/;

export interface ServerSample {
  walBytes: number;
  lsn: string;
  /** On-CPU ns by pid of the server's processes; null when they are not visible here. */
  cpuNs: Map<number, number> | null;
  statements: { calls: number; walBytes: number } | null;
}

export interface CpuSplit {
  /** The backends of the connections the measured processes used. */
  ownUs: number;
  /** The server's background processes (postmaster, checkpointer, WAL writer…), shared by all clients. */
  backgroundUs: number;
  /** The backends of connections named `apart` (this process's API, say). */
  apartUs: number;
  /** Every other backend: other clients of the server. */
  otherUs: number;
}

export interface SchemaWal {
  bytes: number;
  fpiBytes: number;
  records: number;
}

export interface ServerDiff {
  walBytes: number;
  /** The measured schema's own WAL (see schemaWal), when asked for and to be had. */
  schemaWal?: SchemaWal | null;
  cpu: CpuSplit | null;
  statements: { calls: number; walBytes: number } | null;
}

export class ServerMeter {
  private readonly client: pg.Client;
  private pid = 0;
  private postmaster = 0;
  local = false;
  pgStatStatements = false;
  /** Why a figure is missing or how far to trust it. */
  readonly notes: string[] = [];
  /** Queries this meter sent (each its own transaction), to take out of pg_stat_database's counts. */
  queries = 0;
  private readonly kinds = new Map<number, 'background' | 'backend'>();

  constructor(url: string) {
    this.client = new pg.Client({ connectionString: url });
    neverCount(this.client);
  }

  async open(): Promise<void> {
    await this.client.connect();
    this.pid = (await this.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid;
    this.local = readComm(this.pid) === 'postgres';
    if (this.local) {
      const stat = readText(`/proc/${this.pid}/stat`);
      this.postmaster = stat ? Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) : 0;
    } else
      this.notes.push(
        `server CPU: n/a, the server's processes are not visible on this machine (backend pid ${this.pid} not found in /proc)`,
      );
    const preload = (await this.query<{ p: string }>(`SELECT current_setting('shared_preload_libraries') AS p`))[0]!.p;
    if (preload.split(',').some((l) => l.trim() === 'pg_stat_statements')) {
      try {
        await this.query('CREATE EXTENSION IF NOT EXISTS pg_stat_statements');
        await this.query('SELECT count(*) FROM pg_stat_statements');
        this.pgStatStatements = true;
      } catch (e) {
        this.notes.push(`pg_stat_statements loaded but not readable: ${(e as Error).message}`);
      }
    }
    if (!this.pgStatStatements)
      this.notes.push(
        'statements and round trips counted in the client (pg_stat_statements is not in shared_preload_libraries)',
      );
  }

  async sample(): Promise<ServerSample> {
    const [w] = await this.query<{ b: string; lsn: string }>(
      `SELECT l::text AS lsn, pg_wal_lsn_diff(l, '0/0')::text AS b FROM pg_current_wal_lsn() l`,
    );
    let statements: ServerSample['statements'] = null;
    if (this.pgStatStatements) {
      const [s] = await this.query<{ calls: string; wal: string }>(
        'SELECT coalesce(sum(calls), 0)::text AS calls, coalesce(sum(wal_bytes), 0)::text AS wal FROM pg_stat_statements',
      );
      statements = { calls: Number(s!.calls), walBytes: Number(s!.wal) };
    }
    return { walBytes: Number(w!.b), lsn: w!.lsn, cpuNs: this.local ? this.cpuNs() : null, statements };
  }

  /** The database's committed (and rolled back) transactions, as its backends reported them so far. */
  async transactions(): Promise<{ commit: number; rollback: number }> {
    const [r] = await this.query<{ c: string; r: string }>(
      'SELECT xact_commit::text AS c, xact_rollback::text AS r FROM pg_stat_database WHERE datname = current_database()',
    );
    return { commit: Number(r!.c), rollback: Number(r!.r) };
  }

  /** From `a` to `b`; `own` and `apart` are backend pids (the meter's own backend is left out). */
  diff(a: ServerSample, b: ServerSample, own: Iterable<number>, apart: Iterable<number> = []): ServerDiff {
    let cpu: CpuSplit | null = null;
    if (a.cpuNs && b.cpuNs) {
      const ownSet = new Set(own);
      const apartSet = new Set(apart);
      const ns = { ownUs: 0, backgroundUs: 0, apartUs: 0, otherUs: 0 };
      for (const [pid, after] of b.cpuNs) {
        if (pid === this.pid) continue;
        // A process born during the phase spent all of its time in it.
        const d = after - (a.cpuNs.get(pid) ?? 0);
        if (ownSet.has(pid)) ns.ownUs += d;
        else if (apartSet.has(pid)) ns.apartUs += d;
        else if (this.kinds.get(pid) === 'background') ns.backgroundUs += d;
        else ns.otherUs += d;
      }
      cpu = {
        ownUs: ns.ownUs / 1000,
        backgroundUs: ns.backgroundUs / 1000,
        apartUs: ns.apartUs / 1000,
        otherUs: ns.otherUs / 1000,
      };
    }
    const statements =
      a.statements && b.statements
        ? { calls: b.statements.calls - a.statements.calls, walBytes: b.statements.walBytes - a.statements.walBytes }
        : null;
    return { walBytes: b.walBytes - a.walBytes, cpu, statements };
  }

  /** pg_walinspect's schema by measured schema (it goes with the schema it was created in). */
  private readonly walinspect = new Map<string, Promise<string | null>>();

  /**
   * The WAL from `a` to `b` of the relations of `schema` and of their transactions' commits (see
   * the header); null without pg_walinspect.
   */
  async schemaWal(a: ServerSample, b: ServerSample, schema: string): Promise<SchemaWal | null> {
    if (!this.walinspect.has(schema)) this.walinspect.set(schema, this.createWalinspect(schema));
    const at = await this.walinspect.get(schema)!;
    if (at === null) return null;
    try {
      const [r] = await this.query<{ bytes: string; fpi: string; records: string }>(`
        WITH rels AS (
          SELECT pg_relation_filenode(c.oid) AS f FROM pg_class c WHERE c.relnamespace = '"${schema}"'::regnamespace
          UNION SELECT pg_relation_filenode(c.reltoastrelid) FROM pg_class c
            WHERE c.relnamespace = '"${schema}"'::regnamespace AND c.reltoastrelid <> 0
          UNION SELECT pg_relation_filenode(i.indexrelid) FROM pg_class c JOIN pg_index i ON i.indrelid = c.reltoastrelid
            WHERE c.relnamespace = '"${schema}"'::regnamespace
        ),
        r AS (
          SELECT start_lsn, xid::text AS xid, resource_manager, record_length, fpi_length, block_ref
          FROM "${at}".pg_get_wal_records_info('${a.lsn}', '${b.lsn}')
        ),
        mine AS (
          SELECT * FROM r WHERE EXISTS (
            SELECT 1 FROM regexp_matches(r.block_ref, 'rel [0-9]+/[0-9]+/([0-9]+)', 'g') m
            WHERE m[1]::oid IN (SELECT f FROM rels)
          )
        ),
        commits AS (
          SELECT * FROM r WHERE resource_manager = 'Transaction'
            AND xid IN (SELECT xid FROM mine WHERE xid <> '0')
            AND start_lsn NOT IN (SELECT start_lsn FROM mine)
        )
        SELECT (SELECT coalesce(sum(record_length), 0) FROM mine)
             + (SELECT coalesce(sum(record_length), 0) FROM commits) AS bytes,
               (SELECT coalesce(sum(fpi_length), 0) FROM mine) AS fpi,
               (SELECT count(*) FROM mine) + (SELECT count(*) FROM commits) AS records`);
      return { bytes: Number(r!.bytes), fpiBytes: Number(r!.fpi), records: Number(r!.records) };
    } catch (e) {
      this.notes.push(`the measured schema's own WAL: n/a (${(e as Error).message})`);
      return null;
    }
  }

  private async createWalinspect(schema: string): Promise<string | null> {
    try {
      await this.query(`CREATE EXTENSION IF NOT EXISTS pg_walinspect SCHEMA "${schema}"`);
      const [r] = await this.query<{ s: string }>(
        `SELECT n.nspname AS s FROM pg_extension e JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'pg_walinspect'`,
      );
      return r!.s;
    } catch (e) {
      this.notes.push(`the measured schema's own WAL: n/a (pg_walinspect: ${(e as Error).message})`);
      return null;
    }
  }

  async close(): Promise<void> {
    await this.client.end();
  }

  private async query<R extends pg.QueryResultRow>(text: string): Promise<R[]> {
    this.queries++;
    return (await this.client.query<R>(text)).rows;
  }

  /** On-CPU ns of every process of the server. */
  private cpuNs(): Map<number, number> {
    const out = new Map<number, number>();
    for (const name of readdirSync('/proc')) {
      const pid = Number(name);
      if (!Number.isInteger(pid) || pid <= 0) continue;
      if (!this.kinds.has(pid)) {
        if (readComm(pid) !== 'postgres') continue;
        const cmdline = (readText(`/proc/${pid}/cmdline`) ?? '').replaceAll('\0', ' ').trim();
        this.kinds.set(pid, pid === this.postmaster || BACKGROUND.test(cmdline) ? 'background' : 'backend');
      }
      const ns = onCpuNs(pid);
      if (ns !== null) out.set(pid, ns);
    }
    return out;
  }
}

function onCpuNs(pid: number): number | null {
  const sched = readText(`/proc/${pid}/schedstat`);
  if (sched) return Number(sched.split(' ')[0]);
  const stat = readText(`/proc/${pid}/stat`);
  if (!stat) return null;
  // The fields after the command's closing parenthesis: state is the first, utime the 12th, stime the 13th.
  const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return (Number(f[11]) + Number(f[12])) * CLOCK_TICK_NS;
}

function readComm(pid: number): string | null {
  return readText(`/proc/${pid}/comm`)?.trim() ?? null;
}

function readText(path: string): string | null {
  try {
    return readFileSync(path, 'utf8');
  } catch {
    return null;
  }
}
