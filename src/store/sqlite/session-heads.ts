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

/** Where a connection stood when an append ran: operations counted so far (that append's too), and SQLite's `data_version`. */
export interface At {
  operations: number;
  version: number;
}

interface Known {
  sessionId: string;
  runId: string;
  head: FencedHead;
  /** This connection's count of operations when the append that left this head ran (counting it). */
  operations: number;
  /** SQLite's `data_version` then: it changes when another connection commits. */
  version: number;
}

/**
 * The head a fenced append left, so that the next append of the same run to the same session (the
 * next step's) need not read it again (the read joins the session's row and the run's: ~12 µs of a
 * ~50 µs append). A remembered head is used only if nothing else can have changed it since:
 *
 * - this connection ran no other operation in between: every operation is counted, the append of
 *   another run or one without a fence (a message sent meanwhile) as well as a claim (it moves the
 *   fencing token), a seal (the sealed seq) or an erasure; reads too, which costs a read at most;
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
  private operations = 0;
  private known: Known | undefined;

  constructor(db: Database.Database) {
    this.dataVersion = db.prepare<[], number>('PRAGMA data_version').pluck();
  }

  /** An operation starts on this connection (every one, appends included). */
  counted(): void {
    this.operations++;
  }

  /** Where this connection stands, for `lookup` and `learn`: read by an append, in its write transaction. */
  now(): At {
    return { operations: this.operations, version: this.dataVersion.get()! };
  }

  /** The head `runId`'s last append left in `sessionId`, if it is surely still the head: the append before this one, nothing between. */
  lookup(sessionId: string, runId: string, at: At): FencedHead | undefined {
    const k = this.known;
    if (
      !k ||
      k.sessionId !== sessionId ||
      k.runId !== runId ||
      k.operations + 1 !== at.operations ||
      k.version !== at.version
    )
      return undefined;
    return k.head;
  }

  /** The head an append made, to `keep` once its transaction commits (`at`: as `now` said in that append). */
  learn(sessionId: string, runId: string, head: FencedHead, at: At): Known {
    return { sessionId, runId, head, operations: at.operations, version: at.version };
  }

  /** Keeps what `learn` made: call it when the append's transaction commits (an operation after the append in it makes it stale, see `lookup`). */
  keep(known: Known): void {
    this.known = known;
  }
}
