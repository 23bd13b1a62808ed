/**
 * What else an erasure reaches besides the store (ADR-0041): an erasure participant erases what it
 * keeps of the erased sessions or tenant (e.g. a retention archive store) and scans it for what an
 * erasure should have left nothing of. The runtime calls every participant after the store's part.
 */
import type { ErasureFinding, ErasureScope } from '../../store/index.ts';

/** What one erasure reached: the sessions it erased, and the tenant or date it was asked for. */
export interface ErasureTarget {
  scope: ErasureScope;
  /** Every session erased by it (a tenant's or a date's: all of them). */
  sessionIds: readonly string[];
  /** For `tenant`: the tenant. */
  tenant?: string;
  /** For `before`: the date (ms) sessions were idle since before. */
  before?: number;
}

export interface ErasureParticipant {
  /** Its name: its counts are kept under `<name>.<kind>`, its findings name it as their table (`<name>:…`). */
  readonly name: string;
  /** Erases what it keeps of the target; returns how many of each kind it removed. */
  erase(target: ErasureTarget): Promise<Record<string, number>>;
  /** Every place it keeps one of the needles (its `table` says where: e.g. an archive's key). */
  scan(needles: readonly string[]): Promise<ErasureFinding[]>;
}
