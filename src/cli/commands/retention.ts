import { loadConfig } from '../../config/index.ts';
import type { Runtime } from '../../runs/index.ts';
import type { SweepReport } from '../../retention/index.ts';
import { reportJson } from '../../server/routes/retention.ts';
import type { Store } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { noPositionals, openDb, positional, table } from '../common.ts';
import { configuredRuntime } from '../configured-runtime.ts';

export const retentionHelp = `keel retention status [--tenant T]         the policies and what a sweep would do now (a dry run)
keel retention run [--dry-run] [--tenant T] sweep now: archive idle sessions, delete old archives, prune tables
keel retention restore <session>          bring a session back from the archive store, every id kept
  Policies and the archive store come from keel.config's \`retention\` (--config FILE) and from
  the tenants' own (PUT /v1/retention/policy); see docs/operations.md. --tenant sweeps
  one tenant's sessions only (the operational tables are left alone). Works on the local database:
  --db PATH (default $KEEL_DB or ./.keel/keel.db; a postgres:// URL too); --json for scripts.`;

async function runtimeFor(store: Store, config: string | undefined): Promise<Runtime> {
  return configuredRuntime(store, await loadConfig(config));
}

function printReport(io: Io, r: SweepReport): void {
  const verb = r.dryRun ? 'would be' : 'were';
  line(
    io,
    `sessions: ${r.sessions.archived} ${verb} archived, ${r.sessions.deleted} ${verb} deleted${r.sessions.skipped ? `, ${r.sessions.skipped} skipped (they moved on)` : ''}`,
  );
  const ids = (what: string, list: string[], total: number) => {
    if (list.length === 0) return;
    line(io, `  ${what}: ${list.slice(0, 20).join(' ')}${total > 20 ? ` … (${total - 20} more)` : ''}`);
  };
  ids('archived', r.sessions.archivedIds, r.sessions.archived);
  ids('deleted', r.sessions.deletedIds, r.sessions.deleted);
  for (const e of r.sessions.errors) line(io, `  error: session ${e.sessionId}: ${e.message}`);
  const tables = Object.entries(r.tables);
  if (tables.length > 0)
    line(
      io,
      table(
        ['TABLE', 'KEEPS', r.dryRun ? 'WOULD DELETE' : 'DELETED'],
        tables.map(([t, v]) => [t, v.days === null ? 'forever' : `${v.days} days`, String(v.rows)]),
      ),
    );
}

export async function retentionCommand(argv: string[], io: Io): Promise<number> {
  const [sub, ...rest] = argv;
  const name = `retention ${sub ?? ''}`.trim();
  const { values, positionals } = args(name, rest, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    config: { type: 'string' },
    tenant: { type: 'string' },
    'dry-run': { type: 'boolean' },
  });
  if (sub !== 'status' && sub !== 'run' && sub !== 'restore')
    throw new UsageError(`keel retention: status, run or restore\n${retentionHelp}`);
  const id = sub === 'restore' ? positional(name, positionals, 'session id to restore') : undefined;
  if (sub !== 'restore') noPositionals(name, positionals);
  const { store } = await openDb(io, values.db);
  try {
    const rt = await runtimeFor(store, values.config);
    try {
      if (id !== undefined) {
        const r = await rt.retention.restore(id);
        if (values.json) json(io, { session_id: r.sessionId, events: r.events });
        else line(io, `restored session ${r.sessionId}: ${r.events} events, every id kept`);
        return 0;
      }
      const dryRun = sub === 'status' || values['dry-run'] === true;
      const tenant = values.tenant !== undefined ? { tenant: values.tenant } : {};
      const report = await rt.retention.sweep({ dryRun, ...tenant });
      if (values.json) {
        const s = rt.retention.settings;
        json(
          io,
          sub === 'status'
            ? { settings: s, archive_store: rt.retention.archiveStore?.name ?? null, plan: reportJson(report) }
            : reportJson(report),
        );
        return 0;
      }
      if (sub === 'status') {
        line(io, `archive store: ${rt.retention.archiveStore?.name ?? 'none (set retention.archive in keel.config)'}`);
        const policies = await rt.retention.listPolicies(values.tenant);
        line(
          io,
          `policies set by API: ${policies.length === 0 ? 'none' : policies.map((p) => `${p.tenant}${p.agent ? `/${p.agent}` : ''} ${JSON.stringify(p.policy)}`).join('; ')}`,
        );
        line(io, `keel.config: ${JSON.stringify(rt.retention.settings)}`);
      }
      printReport(io, report);
      return 0;
    } finally {
      await rt.close();
    }
  } finally {
    await store.close();
  }
}
