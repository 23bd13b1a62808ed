/**
 * `keel erase` (ADR-0041, docs/operations.md): erase a session, a tenant or every session
 * idle since before a date, on the database, as the operator; `--verify` then scans every table
 * (and every erasure participant) for the erased ids and the `--string`s, and says what it found;
 * `--audit` lists the erasure audit.
 */
import { loadConfig } from '../../config/index.ts';
import { MIN_NEEDLE_LENGTH, type ErasureReport, type ErasureResult } from '../../runs/index.ts';
import type { ErasureFinding, ErasureRecord } from '../../store/index.ts';
import { args, json, line, UsageError, type Io } from '../args.ts';
import { intOption, noPositionals, openDb, time } from '../common.ts';
import { configuredRuntime } from '../configured-runtime.ts';

export const eraseHelp = `keel erase --session ID | --tenant T | --before DATE [--verify] [--string S]... [--json]
    erase a session (and its subagents' sessions), a tenant (its sessions, then its keys revoked and
    unnamed, its schedules, webhooks, datasets, batches and idempotency records deleted), or every
    session idle since before DATE (ISO 8601): from the log, every table and the blobs no longer
    referenced. A tombstone (ids, totals for billing) remains, and an audit record (scope, a hash of
    the target, who, when, counts). It cannot be undone.
    --verify  then scan every table (the log decompressed) for the erased ids and each --string,
              and the SQLite file's bytes: exit 1 if any is found outside a tombstone
    --vacuum  then rebuild the SQLite file (VACUUM; PostgreSQL: VACUUM every table): free space
              that earlier deletes left (e.g. sealing's) goes too. Slow on a large database.
keel erase --verify [--id ID]... [--string S]... [--vacuum]   scan only, erasing nothing
keel erase --audit [--limit 50]                      the erasure audit, newest first
  All work on the database: --db PATH or URL (default $KEEL_DB or ./.keel/keel.db); --config FILE for the agents.`;

export async function eraseCommand(argv: string[], io: Io): Promise<number> {
  const name = 'erase';
  const { values, positionals } = args(name, argv, {
    db: { type: 'string' },
    json: { type: 'boolean' },
    config: { type: 'string' },
    session: { type: 'string' },
    tenant: { type: 'string' },
    before: { type: 'string' },
    verify: { type: 'boolean' },
    id: { type: 'string', multiple: true },
    string: { type: 'string', multiple: true },
    audit: { type: 'boolean' },
    vacuum: { type: 'boolean' },
    limit: { type: 'string' },
  });
  noPositionals(name, positionals);
  const scopes = [values.session, values.tenant, values.before].filter((v) => v !== undefined).length;
  if (scopes > 1) throw new UsageError(`erase: give one of --session, --tenant, --before\n${eraseHelp}`);
  if (values.audit === true && (scopes > 0 || values.verify === true || values.vacuum === true))
    throw new UsageError('erase --audit lists the audit: give no --session, --tenant, --before, --verify or --vacuum');
  if (scopes === 0 && values.audit !== true && values.verify !== true && values.vacuum !== true)
    throw new UsageError(
      `erase: give --session ID, --tenant T or --before DATE (or --verify, --vacuum, --audit)\n${eraseHelp}`,
    );
  if (scopes === 0 && values.verify === true && (values.id ?? []).length + (values.string ?? []).length === 0)
    throw new UsageError('erase --verify alone scans for --id and --string: give at least one');
  let before: number | undefined;
  if (values.before !== undefined) {
    before = Date.parse(values.before);
    if (!Number.isFinite(before))
      throw new UsageError(
        `erase: --before must be a date (ISO 8601, e.g. 2026-01-31), not ${JSON.stringify(values.before)}`,
      );
  }
  const limit = intOption(name, 'limit', values.limit, { min: 1, default: 50 });

  const { store } = await openDb(io, values.db);
  try {
    const config = await loadConfig(values.config);
    const rt = configuredRuntime(store, config);
    try {
      if (values.audit === true) {
        const audit = await rt.erasure.list({ limit });
        if (values.json) json(io, audit);
        else if (audit.length === 0) line(io, 'no erasure yet');
        else for (const r of audit) line(io, auditLine(r));
        return 0;
      }
      let result: ErasureResult | undefined;
      if (values.session !== undefined) result = await rt.erasure.eraseSession(values.session);
      else if (values.tenant !== undefined) result = await rt.erasure.eraseTenant(values.tenant);
      else if (before !== undefined) result = await rt.erasure.eraseBefore(before);
      const purged = values.vacuum === true ? await rt.erasure.purge({ vacuum: true }) : undefined;
      let report: ErasureReport | undefined;
      if (values.verify === true) {
        const ids = [...(result?.sessionIds ?? []), ...(values.id ?? [])];
        // The tenant's name too, when long enough to search for (see MIN_NEEDLE_LENGTH).
        if (values.tenant !== undefined && values.tenant.length >= MIN_NEEDLE_LENGTH) ids.push(values.tenant);
        report = await rt.erasure.verify({ ids, strings: values.string ?? [] });
      }
      if (values.json)
        json(io, {
          ...(result ? { erasure: result } : {}),
          ...(purged !== undefined ? { purged } : {}),
          ...(report ? { verify: report } : {}),
        });
      else {
        if (result) printResult(io, result);
        if (purged !== undefined) line(io, `vacuum: ${purged}`);
        if (report) printReport(io, report);
      }
      return report && !report.clean ? 1 : 0;
    } finally {
      await rt.close({ graceMs: 0 });
    }
  } finally {
    await store.close();
  }
}

const countsText = (counts: Record<string, number>) =>
  Object.entries(counts)
    .map(([k, n]) => `${k} ${n}`)
    .join(', ');

function auditLine(r: ErasureRecord): string {
  return `${time(r.at)}  ${r.scope.padEnd(7)}  by ${r.by}  target sha256 ${r.targetHash.slice(0, 16)}…  ${countsText(r.counts)}  (${r.id})`;
}

function printResult(io: Io, r: ErasureResult): void {
  const n = r.sessionIds.length;
  line(
    io,
    `erased ${n} session${n === 1 ? '' : 's'} (${r.scope}; erasure ${r.id}, audit target sha256 ${r.targetHash})`,
  );
  line(io, `  ${countsText(r.counts)}`);
  line(io, `  on disk: ${r.physical}`);
}

const findingText = (f: ErasureFinding) => `${f.table}.${f.column} [${f.row}]: ${f.needle}`;

function printReport(io: Io, r: ErasureReport): void {
  const where = ['every table of the store', ...r.participants].join(', ');
  if (r.clean) line(io, `verify: ${r.needles.length} ids and strings searched in ${where}: nothing found`);
  else {
    line(io, `verify: FOUND ${r.remnants.length} remnant${r.remnants.length === 1 ? '' : 's'} in ${where}:`);
    for (const f of r.remnants) line(io, `  ${findingText(f)}`);
  }
  if (r.kept.length > 0) {
    const byReason = new Map<string, number>();
    for (const f of r.kept) byReason.set(f.kept!, (byReason.get(f.kept!) ?? 0) + 1);
    line(io, `  kept by design (ids only): ${[...byReason].map(([reason, n]) => `${reason} ×${n}`).join(', ')}`);
  }
}
