import type Database from 'better-sqlite3';

/** A session's head as an append reads it, with the fencing token of the run that appends (null: none, or no such run). */
export interface FencedHead {
  last_seq: number;
  leaf_id: string | null;
  last_turn: number;
  sealed_seq: number;
  erased_at: number | null;
  fencing_token: number | null;
}

interface Known {
  sessionId: string;
  runId: string;
  head: FencedHead;
  /** This connection's count of other operations when the append that left this head ran. */
  writes: number;
  /** SQLite's `data_version` then: it changes when another connection commits. */
  version: number;
}

/**
 * The head a fenced append left, so that the next append of the same run to the same session (the
 * next step's) need not read it again (the read joins the session's row and the run's: ~12 µs of a
 * ~50 µs append). A remembered head is used only if nothing else can have changed it since:
 *
 * - this connection ran no other operation (any operation but an append forgets it: a claim moves
 *   the fencing token, a seal the sealed seq, an erasure ends the log; reads forget it too, which
 *   costs a read at most);
 * - no other connection committed (SQLite's `data_version`, read in the append's own transaction,
 *   under the write lock: nothing commits between that read and the append);
 * - the append that left it committed (it is learnt on commit, through `whenCommitted`; a rollback
 *   never teaches it).
 *
 * One head is kept: the last append's. One run at a time appends step after step without anything
 * in between; with many runs on one connection their appends interleave and each reads its head.
 */
export class SessionHeads {
  private readonly dataVersion: Database.Statement<[], number>;
  private writes = 0;
  private known: Known | undefined;

  constructor(db: Database.Database) {
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
  }

  /** Another operation ran on this connection: what is known may be stale. */
  changed(): void {
    this.writes++;
  }

  /** Where this connection stands now, for `lookup` and `learn`: read in the write transaction. */
  now(): { writes: number; version: number } {
    return { writes: this.writes, version: this.dataVersion.get()! };
  }

  /** The head `runId`'s last append left in `sessionId`, if it is surely still the head. */
  lookup(sessionId: string, runId: string, at: { writes: number; version: number }): FencedHead | undefined {
    const k = this.known;
    if (!k || k.sessionId !== sessionId || k.runId !== runId || k.writes !== at.writes || k.version !== at.version) return undefined;
    return k.head;
  }

  /** The head an append made, learnt once its transaction commits (`at`: as `now` said before the append). */
  learn(sessionId: string, runId: string, head: FencedHead, at: { writes: number; version: number }): Known {
    return { sessionId, runId, head, writes: at.writes, version: at.version };
  }

  /** Keeps what `learn` made: call it when the append's transaction commits (an operation after the append in it makes it stale, see `lookup`). */
  keep(known: Known): void {
    this.known = known;
  }
}
