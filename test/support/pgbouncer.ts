/**
 * A PgBouncer for tests (Debian's `pgbouncer` package: .ci/run installs it), started from a config
 * file in a temporary directory, on a free port, in transaction pooling mode, in front of the test
 * run's PostgreSQL server. Each database alias of it is the server's database with a pool of its own
 * and, when given, a `connect_query` run on every server connection it opens (how a deployment
 * gives the pooler's connections their schema, docs/deployment.md). Nothing is installed here:
 * `pgbouncerBinary()` is undefined when the machine has none, and the tests that need it skip.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, existsSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import pg from 'pg';
import { freePort } from './postgres-server.ts';

/** The pgbouncer binary of the machine, if it has one. */
export function pgbouncerBinary(): string | undefined {
  for (const dir of [...(process.env.PATH ?? '').split(':'), '/usr/sbin', '/usr/local/sbin']) {
    if (dir && existsSync(join(dir, 'pgbouncer'))) return join(dir, 'pgbouncer');
  }
  return undefined;
}

export interface BouncerDatabase {
  /** Run on every server connection the pooler opens for this alias (e.g. SET search_path TO …). */
  connectQuery?: string;
  /** Server connections of the alias at most (PgBouncer's pool_size; default 10). */
  poolSize?: number;
}

export interface Bouncer {
  /** A connection string to `alias` through the pooler. */
  url(alias: string): string;
  stop(): Promise<void>;
  log(): string;
}

const quoteIni = (s: string) => `'${s.replace(/'/g, "''")}'`;

/** Starts PgBouncer in front of `serverUrl` with these database aliases; resolves once it answers. */
export async function startPgbouncer(serverUrl: string, databases: Record<string, BouncerDatabase>): Promise<Bouncer> {
  const bin = pgbouncerBinary();
  if (!bin) throw new Error('pgbouncer is not installed (apt-get install -y pgbouncer)');
  const server = new URL(serverUrl);
  const user = decodeURIComponent(server.username || 'postgres');
  const password = decodeURIComponent(server.password);
  const dbname = decodeURIComponent(server.pathname.slice(1) || 'postgres');
  const dir = mkdtempSync(join(tmpdir(), 'keel-pgbouncer-'));
  // As root, pgbouncer runs as another user (`user` below), which must read its files in here.
  chmodSync(dir, 0o777);
  const port = await freePort();
  const entries = Object.entries(databases).map(([alias, d]) => {
    const parts = [
      `host=${server.hostname}`,
      `port=${server.port || '5432'}`,
      `dbname=${dbname}`,
      `user=${user}`,
      ...(password ? [`password=${password}`] : []),
      `pool_size=${d.poolSize ?? 10}`,
      ...(d.connectQuery ? [`connect_query=${quoteIni(d.connectQuery)}`] : []),
    ];
    return `${alias} = ${parts.join(' ')}`;
  });
  const ini = [
    '[databases]',
    ...entries,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    "unix_socket_dir = ''",
    'pool_mode = transaction',
    'auth_type = trust',
    `auth_file = ${join(dir, 'users.txt')}`,
    `admin_users = ${user}`,
    'max_client_conn = 500',
    'server_idle_timeout = 10',
    ...(process.getuid?.() === 0 ? ['user = postgres'] : []),
    '',
  ].join('\n');
  writeFileSync(join(dir, 'users.txt'), `"${user}" ""\n`, { mode: 0o644 });
  writeFileSync(join(dir, 'pgbouncer.ini'), ini, { mode: 0o644 });
  const child: ChildProcess = spawn(bin, [join(dir, 'pgbouncer.ini')], { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  child.stdout!.setEncoding('utf8').on('data', (c: string) => (output += c));
  child.stderr!.setEncoding('utf8').on('data', (c: string) => (output += c));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const urlOf = (alias: string) => `postgres://${encodeURIComponent(user)}@127.0.0.1:${port}/${alias}`;
  const stop = async () => {
    if (child.exitCode === null) child.kill('SIGINT');
    await Promise.race([exited, new Promise((r) => setTimeout(r, 3000))]);
    if (child.exitCode === null) child.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
  };
  // Up once it answers a statement through the first alias.
  const first = Object.keys(databases)[0]!;
  for (let i = 0; ; i++) {
    const c = new pg.Client({ connectionString: urlOf(first), connectionTimeoutMillis: 1000 });
    c.on('error', () => {});
    try {
      await c.connect();
      await c.query('SELECT 1');
      await c.end();
      break;
    } catch (e) {
      await c.end().catch(() => {});
      if (child.exitCode !== null || i >= 50) {
        await stop();
        throw new Error(`pgbouncer did not start: ${(e as Error).message}\n${output}`, { cause: e });
      }
      await new Promise((r) => setTimeout(r, 100));
    }
  }
  return { url: urlOf, stop, log: () => output };
}
