/**
 * What both backends' erasure scans share (ADR-0041): how a needle is looked for in a value, how a
 * row is named in a finding, and which findings an erasure keeps by design (tombstones).
 */
import { createHash } from 'node:crypto';
import { PAUSED_FOR_ERASED_SESSION, PAUSED_FOR_ERASED_TENANT } from './schedule-rows.ts';

/** The audit's hash of an erasure's target: SHA-256 of `scope:target`, hex. */
export function erasureTargetHash(scope: string, target: string): string {
  return createHash('sha256').update(`${scope}:${target}`).digest('hex');
}

/** The forms a needle takes in text: as it is, and escaped as inside a JSON string. */
export function needleForms(needle: string): string[] {
  const escaped = JSON.stringify(needle).slice(1, -1);
  return escaped === needle ? [needle] : [needle, escaped];
}

/** The needles a text holds (each needle once). */
export function needlesIn(text: string, needles: readonly string[]): string[] {
  return needles.filter((n) => needleForms(n).some((f) => text.includes(f)));
}

/** A row's key in a finding: its key columns as `name=value`, joined by `,` (a 16-byte id shown as its UUID). */
export function rowKey(row: Record<string, unknown>, keyColumns: readonly string[]): string {
  return keyColumns.map((k) => `${k}=${shown(row[k])}`).join(',');
}

function shown(v: unknown): string {
  if (Buffer.isBuffer(v) || v instanceof Uint8Array) {
    const b = Buffer.from(v);
    if (b.length === 16) {
      const h = b.toString('hex');
      return `${h.slice(0, 8)}-${h.slice(8, 12)}-${h.slice(12, 16)}-${h.slice(16, 20)}-${h.slice(20)}`;
    }
    return b.toString('hex');
  }
  return String(v);
}

/**
 * Whether a finding is one an erasure keeps by design, and why; `session` when it is kept only if
 * that session is erased (the caller checks). Only ids and tenants are kept, never content:
 * - a tombstone: the erased session's row (`sessions`: id, tenant) and its runs' rows (`runs`:
 *   ids, tenant, kept for billing, ADR-0010);
 * - the log's erasure marker (`erased_logs`: the ids of erased logs, which the immutability
 *   trigger reads);
 * - a revoked API key's row (`api_keys`: its tenant);
 * - a schedule paused because its target session or its tenant was erased (its target, last run,
 *   tenant);
 * - the quota ledger's charges (`quota_charges.call_id`: a run's id, its turn and step), kept with
 *   the runs' rows for billing and so that erasing sessions never gives a tenant its quota back
 *   (ADR-0043); a tenant's erasure removes them.
 */
export function keptBecause(
  table: string,
  column: string,
  row: Record<string, unknown>,
): { reason: string; session?: string } | undefined {
  switch (table) {
    case 'sessions':
      return (column === 'id' || column === 'tenant') && row.erased_at !== null && row.erased_at !== undefined
        ? { reason: 'tombstone' }
        : undefined;
    case 'runs':
      return ['id', 'session_id', 'parent_run_id', 'rerun_of', 'tenant'].includes(column)
        ? { reason: "tombstone's run (billing)", session: String(row.session_id) }
        : undefined;
    case 'erased_logs':
      return { reason: 'erased log marker' };
    case 'api_keys':
      return (column === 'tenant' || column === 'id') && row.revoked_at !== null && row.revoked_at !== undefined
        ? { reason: 'revoked key' }
        : undefined;
    case 'schedules':
      return ['target', 'last_run_id', 'tenant'].includes(column) &&
        (row.paused_reason === PAUSED_FOR_ERASED_SESSION || row.paused_reason === PAUSED_FOR_ERASED_TENANT)
        ? { reason: 'schedule paused by the erasure' }
        : undefined;
    case 'quota_charges':
      return column === 'call_id' ? { reason: 'quota ledger (billing)' } : undefined;
    default:
      return undefined;
  }
}
